"""A 2-rank job over btl/sm while another process (this test) writes into rank 1's
segment through /proc/<pid>/fd: every field ends in an error naming the rank, the
segment and the field, or in no harm; never a hang, a SIGBUS or a process left behind."""

from __future__ import annotations

import errno
import mmap
import os
import random
import signal
import struct
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from pmca.btl import FRAMEWORK
from pmca.testing import find_launcher
from pmca.testing._namespaces import running, signal_all, stat_fields

RANK = Path(__file__).with_name("_hostile_rank.py")
#: Offsets in struct sm_header (sm.h).
FIFO_CAPACITY, ENQUEUE, DEQUEUE, CLOSING = 28, 128, 192, 264
FIFO = 4096  # where the FIFO's cells start: 16 bytes each, the sequence first
#: The job's own bound: a hang is anything longer (the ranks' timeouts are 10 s).
JOB_SECONDS = 60

pytestmark = [
    pytest.mark.mpi,
    pytest.mark.skipif(
        not any(ref.name == "sm" for ref in FRAMEWORK.static_components),
        reason="btl sm is not built in",
    ),
]


def _wait_for(path: Path, seconds: float) -> None:
    deadline = time.monotonic() + seconds
    while not path.exists():
        assert time.monotonic() < deadline, f"{path.name} never appeared"
        time.sleep(0.01)


Writer = Callable[[mmap.mmap, int], None]


def _job(tmp_path: Path, write: Callable[[int, int, int], None]) -> dict[int, str]:
    """Run the job, call ``write(pid, fd, size)`` on rank 1's segment while both
    ranks idle, and return each rank's result line; no rank may outlive it."""
    launcher = find_launcher()
    if launcher is None:
        pytest.skip("no MPI launcher in this environment (install pmca[mpi] or mpich)")
    command = [*launcher.command(2, ()), sys.executable, str(RANK), str(tmp_path)]
    job = subprocess.Popen(
        command,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        env={**os.environ, "TMPDIR": str(tmp_path)},  # the launcher's files go with the test
    )
    pids: list[int] = []
    try:
        for rank in (0, 1):
            _wait_for(tmp_path / f"rank{rank}", JOB_SECONDS)
            pids.append(int((tmp_path / f"rank{rank}").read_text().split()[0]))
            _wait_for(tmp_path / f"idle{rank}", JOB_SECONDS)
        pid, fd, size = map(int, (tmp_path / "rank1").read_text().split())
        write(pid, fd, size)
        (tmp_path / "corrupted").touch()
        output, _ = job.communicate(timeout=JOB_SECONDS)
    except subprocess.TimeoutExpired:
        job.kill()
        output, _ = job.communicate()
        pytest.fail(f"the job hung:\n{output[-3000:]}")
    finally:
        job.kill()
        left = [pid for pid in pids if running(stat_fields(pid))]
        signal_all(left, signal.SIGKILL)  # ours: the ranks this test launched
        assert not left, f"ranks {left} outlived the job"
    return {
        rank: (tmp_path / f"result{rank}").read_text()
        if (tmp_path / f"result{rank}").exists()
        else f"no result (job output: {output[-2000:]})"
        for rank in (0, 1)
    }


def _mapped(pid: int, fd: int, size: int, action: Writer) -> None:
    with open(f"/proc/{pid}/fd/{fd}", "r+b", buffering=0) as segment:
        view = mmap.mmap(segment.fileno(), size)
        try:
            capacity = struct.unpack_from("<I", view, FIFO_CAPACITY)[0]
            action(view, capacity)
        finally:
            view.close()


def _every_cell_ahead(view: mmap.mmap, capacity: int) -> None:
    for cell in range(capacity):
        at = FIFO + 16 * cell
        struct.pack_into("<Q", view, at, struct.unpack_from("<Q", view, at)[0] + (1 << 40))


def _position(delta: int) -> Writer:
    def move(view: mmap.mmap, capacity: int) -> None:
        position = struct.unpack_from("<Q", view, ENQUEUE)[0]
        struct.pack_into("<Q", view, ENQUEUE, (position + delta) % (1 << 64))

    return move


def _closing(view: mmap.mmap, capacity: int) -> None:
    struct.pack_into("<I", view, CLOSING, 7)


#: field overwritten -> what the errors name
NAMED: dict[str, tuple[Writer, str]] = {
    "every cell's sequence far ahead": (_every_cell_ahead, "FIFO cell"),
    "enqueue_position far ahead": (_position(1 << 40), "enqueue_position"),
    "enqueue_position behind": (_position(-5), "enqueue_position"),
    "enqueue_position a few cells ahead": (_position(3), "enqueue_position"),
    "closing": (_closing, "closing is 7"),
}


def _named(line: str, field: str) -> bool:
    """A PeerFailed naming rank 1's segment and the field."""
    result = line.split(" ", 1)[1]
    segment = "sm segment of rank 1 "
    return result.startswith("PeerFailed: ") and segment in result and field in result


def _failed_in_time(line: str) -> bool:
    """A btl error (not the caller's timeout) before the caller's own timeout."""
    seconds, result = line.split(" ", 1)
    return result.startswith(("PeerFailed", "PeerFinalized")) and float(seconds) < 10


@pytest.mark.parametrize("case", sorted(NAMED))
def test_an_overwritten_field_fails_the_peer_naming_it(tmp_path: Path, case: str) -> None:
    writer, field = NAMED[case]
    results = _job(tmp_path, lambda pid, fd, size: _mapped(pid, fd, size, writer))
    assert all(_failed_in_time(line) for line in results.values()), results
    assert any(_named(line, field) for line in results.values()), results


def test_the_readers_own_position_is_not_read_from_the_segment(tmp_path: Path) -> None:
    def scramble(view: mmap.mmap, capacity: int) -> None:
        struct.pack_into("<Q", view, DEQUEUE, 12345)

    results = _job(tmp_path, lambda pid, fd, size: _mapped(pid, fd, size, scramble))
    assert all(line.endswith(" ok") for line in results.values()), results


@pytest.mark.parametrize("seed", range(4))
def test_random_bytes_on_a_fifo_cell_fail_the_peer_naming_it(tmp_path: Path, seed: int) -> None:
    """1-8 random bytes over one random cell's sequence (the words of the first 64 KiB
    that every loop reads: the rest is header fields, tested one by one above,
    padding, and fragments, whose length and tag test_untrusted_peers.py covers)."""
    rng = random.Random(seed)

    def scribble(view: mmap.mmap, capacity: int) -> None:
        count = rng.randint(1, 8)
        at = FIFO + 16 * rng.randrange(capacity) + rng.randrange(0, 9 - count)
        view[at : at + count] = bytes(b ^ rng.randint(1, 255) for b in view[at : at + count])

    results = _job(tmp_path, lambda pid, fd, size: _mapped(pid, fd, size, scribble))
    assert all(_failed_in_time(line) for line in results.values()), results
    assert any(_named(line, "FIFO cell ") for line in results.values()), results


def test_a_segment_cannot_be_shrunk_under_its_readers(tmp_path: Path) -> None:
    refused: list[int] = []

    def shrink(pid: int, fd: int, size: int) -> None:
        with open(f"/proc/{pid}/fd/{fd}", "r+b", buffering=0) as segment:
            try:
                os.ftruncate(segment.fileno(), 4096)
            except OSError as exc:
                refused.append(exc.errno)

    results = _job(tmp_path, shrink)
    assert refused == [errno.EPERM], results
    assert all(line.endswith(" ok") for line in results.values()), results
