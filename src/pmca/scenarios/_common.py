"""Helpers shared by the seed scenarios: child processes and the native-backend check.

Every variant of a scenario that patches libc, can hang or can crash runs in
a fresh interpreter (forced multi-threaded, as glibc only takes its arena
locks once a second thread has existed).  The child calls a function of the
scenario module, which reports back one JSON line through :func:`emit`.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from attrs import frozen

from ._result import ScenarioResult

#: Prefix of the one line a child prints to hand its result to the parent.
MARKER = "PMCA-SCENARIO-RESULT:"

#: Environment variables that decide the load mode; the only ``PMCA_MCA_*``
#: settings a scenario child inherits, so a user's own settings (say
#: ``memory_patcher_disable``) cannot change what a scenario demonstrates.
LOAD_MODE_VARIABLES = ("PMCA_MCA_mca_base_component_dso", "PMCA_MCA_mca_base_component_static")

#: Extra seconds the parent waits beyond the child's own watchdog.
_BACKSTOP = 30.0


def emit(payload: Mapping[str, Any]) -> None:
    """Hand ``payload`` to the parent (called in the child)."""
    print(MARKER + json.dumps(payload), flush=True)


@frozen
class Child:
    """What a scenario child did.

    :param hung: it did not finish in time; its own watchdog (faulthandler)
        dumped every thread's stack into ``stderr`` before exiting, or the
        parent killed it.
    :param payload: what the child passed to :func:`emit`, if it got there.
    """

    returncode: int | None
    hung: bool
    payload: dict[str, Any] | None
    stdout: str
    stderr: str

    @property
    def completed(self) -> bool:
        """It exited normally and reported a result."""
        return self.returncode == 0 and self.payload is not None

    def describe_failure(self) -> str:
        """One line saying how the child went wrong, with the last line of its stderr."""
        last = next((line for line in reversed(self.stderr.splitlines()) if line.strip()), "")
        how = "hung" if self.hung else f"exited with {self.returncode}"
        return f"child {how}" + (f": {last.strip()}" if last else "")


def _text(data: str | bytes | None) -> str:
    if data is None:
        return ""
    return data.decode(errors="replace") if isinstance(data, bytes) else data


def builtin_selections() -> dict[str, str]:
    """``PMCA_MCA_<fw>`` selecting only pmca's own components, for each built-in framework.

    A scenario demonstrates pmca's machinery: a third-party component that
    happens to be installed (and would win selection) must not take its place.
    """
    from ..runtime._catalog import BUILTIN_FRAMEWORKS, load_builtin

    selections: dict[str, str] = {}
    for target in BUILTIN_FRAMEWORKS:
        framework = load_builtin(target)
        names = ",".join(ref.name for ref in framework.static_components)
        if names:
            selections[f"PMCA_MCA_{framework.name}"] = names
    return selections


def _child_environment(extra: Mapping[str, str] | None, inherit_mca: bool) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if inherit_mca or not k.startswith("PMCA_MCA_")}
    env.update({k: os.environ[k] for k in LOAD_MODE_VARIABLES if k in os.environ})
    if not inherit_mca:  # nor a parameter file of the user's, nor a third party's component
        env["PMCA_MCA_mca_base_param_files"] = "none"
        env.update(builtin_selections())
    # The child must import this very pmca, wherever it was imported from.
    package_root = str(Path(__file__).resolve().parents[2])
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [package_root, env.get("PYTHONPATH")]))
    env.update(extra or {})
    return env


def run_child(
    module: str,
    function: str,
    *args: str,
    hang_after: float,
    env: Mapping[str, str] | None = None,
    inherit_mca: bool = False,
) -> Child:
    """Run ``module.function(*args)`` in a fresh, multi-threaded interpreter.

    After ``hang_after`` seconds the child dumps all its threads' stacks and
    exits (the dump is how a deadlock is told apart from a crash).  The
    child sees no ``PMCA_MCA_*`` variable but the load mode and reads no
    parameter file, unless ``inherit_mca`` (then it runs with the user's
    configuration).
    """
    from ..testing._subprocess import FORCE_THREADED

    code = (
        FORCE_THREADED
        + "import faulthandler\n"
        + f"faulthandler.dump_traceback_later({hang_after!r}, exit=True)\n"
        + f"from {module} import {function}\n"
        + f"{function}(*{args!r})\n"
    )
    try:
        done = subprocess.run(
            [sys.executable, "-X", "faulthandler", "-c", code],
            capture_output=True,
            text=True,
            timeout=hang_after + _BACKSTOP,
            env=_child_environment(env, inherit_mca),
            check=False,
        )
    except subprocess.TimeoutExpired as expired:
        return Child(None, True, None, _text(expired.stdout), _text(expired.stderr))
    payload = None
    for line in done.stdout.splitlines():
        if line.startswith(MARKER):
            payload = json.loads(line[len(MARKER) :])
    hung = "Timeout (" in done.stderr and payload is None
    return Child(done.returncode, hung, payload, done.stdout, done.stderr)


def skipped_without_native(
    scenario: str, unavailable: Callable[[], str | None] | None = None
) -> list[ScenarioResult] | None:
    """A ``skipped`` row when this machine has no native hook backend, or when
    ``unavailable()`` names what else the scenario lacks; else None."""
    from .. import native

    reason = native.unavailable_reason()
    if reason is not None:
        reason = f"no native backend: {reason}"
    elif unavailable is not None:
        reason = unavailable()
    if reason is None:
        return None
    return [ScenarioResult(scenario, "all variants", "skipped", reason)]
