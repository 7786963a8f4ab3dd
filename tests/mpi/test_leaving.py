"""Finalize under a real mpirun/mpiexec: data moves, and leaving is a message.

Before finalize exchanged LEAVE messages over the btls it met in a
launcher barrier that moved no data: a tcp receiver starting 1 s late got
13,634 (MPICH) or 62,143 (Open MPI) of 100,000 completed sends, then
``PeerFailed``; a rank that raised inside its session made its peers wait
60 s or more for an error, and its own finalize 60 s.
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from pmca.testing import Launcher, run_mpi

from .conftest import BTL_SETS, ok_lines, program

pytestmark = pytest.mark.mpi


@pytest.mark.parametrize(("btl", "first"), BTL_SETS, ids=[b for b, _ in BTL_SETS])
def test_completed_sends_reach_a_receiver_that_starts_late(
    launcher: Launcher, pmca_env, btl: str, first: str
) -> None:
    child = run_mpi(
        launcher, 2, [program("leaving.py"), "--btl", btl, "--case", "late-receiver"], timeout=300
    )
    output = f"--- stdout\n{child.stdout}\n--- stderr\n{child.stderr}"
    assert child.returncode == 0, output
    lines = ok_lines(child.stdout)
    assert "OK rank 1 received 100000 of 100000" in lines, output
    assert any(line.startswith("OK rank 0 finalize took") for line in lines), output
    assert "FinalizeWarning" not in child.stderr, output


def test_a_rank_raising_in_its_session_is_known_to_every_other_within_2s(
    launcher: Launcher, pmca_env
) -> None:
    """Rank 3 of 4 raises inside ``with Session``; ranks 0-2 wait on it in a receive.

    Each learns it (``PeerFinalized``, ``after_error``) within 2 s of the
    raise, measured on the host's one monotonic clock; the raising rank's
    finalize ends within its bound (5 s) plus a margin for a loaded host.
    """
    btl = BTL_SETS[-1][0]
    child = run_mpi(launcher, 4, [program("leaving.py"), "--btl", btl, "--case", "raise"])
    output = f"--- stdout\n{child.stdout}\n--- stderr\n{child.stderr}"
    assert child.returncode == 0, output
    lines = ok_lines(child.stdout)
    assert len(lines) == 4, output
    raised_line = next(line for line in lines if line.startswith("OK rank 3 raised at"))
    raised = float(re.search(r"raised at ([\d.]+)", raised_line)[1])
    took = float(re.search(r"finalize took ([\d.]+)s", raised_line)[1])
    assert took < 5.0 + 5.0, raised_line
    for rank in range(3):
        line = next(line for line in lines if line.startswith(f"OK rank {rank} learned at"))
        learned = float(re.search(r"learned at ([\d.]+)", line)[1]) - raised
        assert learned < 2.0, f"rank {rank} learned {learned:.2f} s after the raise: {line}"


def test_an_interrupted_job_ends_within_the_finalize_bound(
    launcher: Launcher, pmca_env, tmp_path: Path
) -> None:
    """Ctrl-C to the launcher while every rank waits on a receive nobody sends.

    Under MPICH each rank gets SIGINT from ``mpiexec``, leaves its session
    after the ``KeyboardInterrupt`` ("leaving (error)"), and the job ends
    within the finalize bound (5 s) plus a margin for a loaded host; Open
    MPI's ``mpirun`` ends its ranks itself, and must do so as quickly. Before leaving was
    a message, finalize after an error waited in a launcher barrier for the
    whole modex timeout: Ctrl-C to MPICH's ``mpiexec`` took 60 s.
    """
    btl = BTL_SETS[-1][0]
    result = tmp_path / "result"
    command = [
        *launcher.command(2),
        sys.executable,
        program("leaving.py"),
        "--btl",
        btl,
        "--case",
        "interrupt",
        "--result",
        str(result),
    ]
    child = subprocess.Popen(
        command,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
        env={**os.environ, "TMPDIR": str(tmp_path)},  # the launcher's files go with the test
    )
    try:
        deadline = time.monotonic() + 120
        while _lines(result, "waiting") < 2:
            assert child.poll() is None and time.monotonic() < deadline, child.communicate()
            time.sleep(0.05)
        time.sleep(0.5)  # both ranks are inside their receive
        interrupted = time.monotonic()
        child.send_signal(signal.SIGINT)
        stdout, stderr = child.communicate(timeout=60)
        ended = time.monotonic() - interrupted
    finally:
        if child.poll() is None:
            os.killpg(child.pid, signal.SIGKILL)
            child.communicate()
    output = f"--- result\n{result.read_text()}\n--- stdout\n{stdout}\n--- stderr\n{stderr}"
    if launcher.name == "mpich":  # Hydra hands SIGINT on to the ranks; PRRTE ends them itself
        assert _lines(result, "interrupted, finalize took") == 2, output
    assert ended < 5.0 + 5.0, f"the job ended {ended:.1f} s after the interrupt\n{output}"


def _lines(result: Path, text: str) -> int:
    if not result.exists():
        return 0
    return sum(text in line for line in result.read_text().splitlines())
