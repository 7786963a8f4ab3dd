"""Import third-party components in child processes first (``pmca info --isolate``).

A component whose import crashes the interpreter (a segfault in an
extension it loads) would take ``pmca info`` and ``pmca doctor`` down with
it, saying nothing of which plugin did it. Isolated, each entry-point or
drop-in component is imported once in a child process; one that dies by a
signal is reported by name, location and distribution, and never imported
in the process itself. Built-in components are pmca's own and not probed.
"""

from __future__ import annotations

import signal
import subprocess
import sys
from collections.abc import Iterable

from ._discovery import Candidate
from ._errors import ComponentError

#: The child: the same ``Candidate.load`` the loader calls, nothing else.
_CHILD = """
import sys
from pathlib import Path
from pmca.mca._discovery import Candidate
framework, name, origin, target, path = sys.argv[1:6]
Candidate(framework, name, origin, target, path=Path(path) if path else None).load()
"""


class ComponentCrashed(ComponentError):
    """A component's import killed the child process that tried it."""


def crashed_imports(candidates: Iterable[Candidate], *, timeout: float = 60.0) -> dict[str, str]:
    """``{component name: why}`` for each third-party candidate whose import kills a child.

    An import that merely raises is left to the normal load (which reports it).
    """
    crashed: dict[str, str] = {}
    for candidate in candidates:
        if candidate.origin == "static":
            continue
        path = str(candidate.path) if candidate.path is not None else ""
        args = [candidate.framework, candidate.name, candidate.origin, candidate.target, path]
        try:
            done = subprocess.run(
                [sys.executable, "-c", _CHILD, *args],
                capture_output=True,
                timeout=timeout,
                check=False,
            )
        except subprocess.TimeoutExpired:
            crashed[candidate.name] = f"importing it did not finish within {timeout:g} s"
            continue
        if done.returncode < 0:
            crashed[candidate.name] = f"importing it killed the process ({_signal_name(done)})"
    return crashed


def _signal_name(done: subprocess.CompletedProcess[bytes]) -> str:
    try:
        return signal.Signals(-done.returncode).name
    except ValueError:
        return f"signal {-done.returncode}"


__all__ = ["ComponentCrashed", "crashed_imports"]
