"""Back-pressure under a real launcher: a receiver that stops reading holds its sender back."""

from __future__ import annotations

import pytest

from pmca.testing import Launcher, run_mpi

from .conftest import ok_lines, program

pytestmark = pytest.mark.mpi


@pytest.mark.parametrize("btl", ["self,tcp", "self,sm"])
def test_a_receiver_that_stops_reading(launcher: Launcher, pmca_env, btl: str) -> None:
    child = run_mpi(launcher, 2, [program("backpressure.py"), "--btl", btl], timeout=300)
    output = f"--- stdout\n{child.stdout}\n--- stderr\n{child.stderr}"
    assert child.returncode == 0, output
    assert len(ok_lines(child.stdout)) == 2, output


#: btl_tcp_recv_queue_limit of the slow-receiver job: 8 MiB, under an eighth of its flood.
RECV_LIMIT = 8 << 20


@pytest.mark.parametrize("behind", ["recv", "iprobe"])
def test_a_slow_receiver_holds_at_most_its_limit(launcher: Launcher, pmca_env, behind: str) -> None:
    # Rank 1 progresses without receiving while rank 0 sends 64 MiB: what it
    # holds (unexpected messages, its memory) stays within the limit plus one
    # message, a receive (or an iprobe loop) for the message behind them all
    # still finds it, and every message arrives intact and in order.
    argv = [program("slow_receiver.py"), "--btl", "self,tcp", "--limit", str(RECV_LIMIT)]
    argv += ["--behind", behind]
    child = run_mpi(launcher, 2, argv, timeout=300)
    output = f"--- stdout\n{child.stdout}\n--- stderr\n{child.stderr}"
    assert child.returncode == 0, output
    assert len(ok_lines(child.stdout)) == 2, output
