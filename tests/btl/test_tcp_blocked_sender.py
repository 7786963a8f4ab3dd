"""A blocking tcp send waiting for room sleeps instead of polling.

Rank 1 (a child) sends to rank 0 (this process), which reads nothing until
told: once the socket and ``btl_tcp_send_queue_limit`` are full, a blocking
``send`` waits. After its spin it must sleep until the socket can take more
(or a message arrives), as a waiting receive does: over a 2 s wait, the
sender's process uses under a tenth of one core. Before, the tcp btl said
it had to be polled while output was queued, and the wait polled and yielded
the CPU in a loop, using the whole core.
"""

from __future__ import annotations

import textwrap
import time
from pathlib import Path

import pytest

from pmca.testing import run_pair

SIZE = 16 * 1024
LIMIT = 256 * 1024
WAIT = 2.0
#: Polling uses a whole core (a quarter to a half of one on a machine loaded
#: four times over, niced); sleeping, about 2 %.
MOST = 0.1

_SIDE = textwrap.dedent(
    """
    import os, socket, sys, time
    from pathlib import Path
    import pmca
    from pmca.world import PairWorld

    MCA = {mca!r}
    SIZE, LIMIT, WAIT = {size}, {limit}, {wait}
    GO = Path({go!r})
    PAYLOAD = bytes(range(256)) * (SIZE // 256)

    def cpu():
        times = os.times()
        return times.user + times.system

    def tell(text):
        ready = GO.with_suffix(".new")
        ready.write_text(text)
        ready.rename(GO)  # whole, at once

    def send(s):
        try:
            share, sent = blocked(s)
        except BaseException as exc:
            tell(f"rank 1 failed: {{exc!r}}")
            raise
        tell(str(sent))
        return share

    def blocked(s):
        # The share of a core this process used during the first send that waited
        # WAIT s for room (and timed out), and the number of sends made.
        p2p = s.p2p
        for sent in range(1, 8192):  # 128 MiB: far more than the socket and the queue hold
            began, used = time.monotonic(), cpu()
            try:
                p2p.send(0, 5, PAYLOAD, timeout=WAIT)
            except TimeoutError:  # delivered all the same, once rank 0 reads
                return (cpu() - used) / (time.monotonic() - began), sent
        raise AssertionError(f"{{sent}} sends and none waited: the receiver reads nothing")

    def receive(s):
        deadline = time.monotonic() + 300
        while not GO.exists():  # not reading: nothing progresses here
            assert time.monotonic() < deadline, "never told to read"
            time.sleep(0.05)
        told = GO.read_text()
        assert told.isdigit(), told
        into = bytearray(SIZE)
        for i in range(int(told)):
            assert s.p2p.recv(1, 5, into, timeout=120) == SIZE and into == PAYLOAD, i
        return None

    def run(fd, rank):
        world = PairWorld(socket.socket(fileno=fd), rank)
        with pmca.Session(mca=MCA, world=world) as s:
            return send(s) if rank == 1 else receive(s)

    if __name__ == "__main__":
        print("share", run(int(sys.argv[1]), 1))
    """
)


@pytest.mark.parametrize("btl", ["self,tcp"])
def test_a_blocked_tcp_send_sleeps(pmca_env, tmp_path: Path, btl: str) -> None:
    mca = {"btl": btl, "btl_tcp_send_queue_limit": LIMIT, "pmca_base_modex_timeout": 120}
    source = _SIDE.format(mca=mca, size=SIZE, limit=LIMIT, wait=WAIT, go=str(tmp_path / "go"))
    started = time.monotonic()
    _, out = run_pair(source, tmp_path, timeout=300)
    share = float(out.split("share", 1)[1].split()[0])
    assert share < MOST, f"the blocked sender used {share:.0%} of a core ({out})"
    assert time.monotonic() - started > WAIT
