"""sm trusts no peer: a corrupt segment is refused or reported as that peer's failure,
and a producer killed mid-enqueue does not block the FIFO for the others."""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

import pytest

from .test_transport import connect

CORRUPT = Path(__file__).with_name("_corrupt.py")


def _run(kind: str, seed: int, timeout: float = 120) -> str:
    done = subprocess.run(
        [sys.executable, str(CORRUPT), kind, str(seed)],
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )
    assert done.returncode == 0, (kind, seed, done.returncode, done.stderr[-2000:])
    return done.stdout.strip()


@pytest.mark.parametrize("seed", range(12))
def test_a_corrupt_segment_layout_is_refused_naming_the_peer(seed: int) -> None:
    line = _run("layout", seed)
    assert line.startswith("refused "), line
    assert "cannot map the sm segment of peer 1" in line, line
    assert "layout cannot be trusted" in line, line


@pytest.mark.parametrize("seed", range(6))
def test_a_corrupt_entry_is_that_peers_fault_and_the_fifo_goes_on(seed: int) -> None:
    line = _run("runtime", seed)
    assert "fault of peer 1: " in line, line
    assert line.endswith("then 1 6 b'sound'"), line


@pytest.mark.parametrize("seed", range(6))
def test_a_sender_gives_up_on_an_overwritten_fifo_naming_the_field(seed: int) -> None:
    # a hang here is the claim loop spinning on the receiver's word (20 s is a hang)
    line = _run("claim", seed, timeout=20)
    assert ": fault of peer 0: " in line and "the sm segment of rank 0 " in line, line
    assert "FIFO cell " in line and "enqueue_position " in line, line


def test_a_segment_that_could_shrink_is_refused() -> None:
    line = _run("unsealed", 0)
    assert line.startswith("refused: ") and "cannot map the sm segment of peer 1 " in line, line
    assert "not sealed against resizing (F_SEAL_SHRINK, F_SEAL_GROW)" in line, line


def test_a_producer_killed_mid_enqueue_blocks_nobody(transport, spawn, sm_transport) -> None:
    rounds = 5
    here, children, _ = connect(transport, spawn, peers=1 + rounds, fifo_capacity=64)
    talker, victims = children[0], children[1:]
    for round_, victim in enumerate(victims):
        rank = 2 + round_
        victim.start("claim_and_die", 0)
        victim.process.wait(timeout=30)
        talker.start("send", 0, [(1, bytes([round_, i])) for i in range(20)])
        got, faults = [], []
        deadline = time.monotonic() + 60
        while len(got) < 20:
            assert time.monotonic() < deadline, (round_, got, faults)
            try:
                message = here.poll()
            except sm_transport.PeerFault as exc:
                faults.append(exc.peer)
                continue
            if message is None:
                here.wait(0.05)
                continue
            source, tag, data = message
            got.append((source, tag, bytes(data)))
        assert talker.answer() is None
        assert got == [(1, 1, bytes([round_, i])) for i in range(20)]
        assert faults == [rank], faults
