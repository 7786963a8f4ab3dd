"""Two processes joined by a socket pair: this one and a child, each running one side."""

from __future__ import annotations

import socket
import subprocess
import sys
from pathlib import Path
from typing import Any

from .._public import public


@public
def run_pair(source: str, directory: Path, *, timeout: float = 120.0) -> tuple[Any, str]:
    """Run ``source``'s ``run(fd, rank)`` as rank 0 here and as rank 1 in a child.

    ``source`` defines ``run(fd, rank)`` (``fd``: this side's end of a
    connected socket pair, as for :class:`pmca.world.PairWorld`) and, under
    ``if __name__ == "__main__":``, prints ``run(int(sys.argv[1]), 1)``.
    Returns rank 0's result and the child's standard output; a child that
    fails raises :class:`AssertionError` with its standard error.
    """
    script = directory / "pair_side.py"
    script.write_text(source)
    parent, child_end = socket.socketpair()
    child = subprocess.Popen(
        [sys.executable, str(script), str(child_end.fileno())],
        pass_fds=[child_end.fileno()],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    child_end.close()
    namespace: dict[str, Any] = {}
    exec(compile(source, str(script), "exec"), namespace)
    try:
        result = namespace["run"](parent.detach(), 0)
    finally:
        out, err = child.communicate(timeout=timeout)
    if child.returncode != 0:
        raise AssertionError(f"rank 1 exited with {child.returncode}:\n{err}")
    return result, out
