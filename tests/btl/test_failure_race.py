"""A local peer killed while two threads post receives: every receive ends in PeerFailed.

The failure is noticed by whichever thread polls the peer's pidfd; it fails
the peer's requests while the other threads post new ones. Before the bml
took its lock for that, the queues changed under the posting threads
("dictionary changed size during iteration", or a receive posted into a
queue just dropped, which then never finished).
"""

from __future__ import annotations

import os
import random
import signal
import socket
import sys
import threading
import time

import pytest

import pmca
from pmca.btl import PeerFailed
from pmca.world import PairWorld

ROUNDS = 200
#: Bounds the whole loop; a round takes a fork and two session start-ups.
BUDGET = 600.0


def _child(sock: socket.socket, delay: float) -> None:
    try:
        with pmca.Session(mca={"btl": "self,sm"}, world=PairWorld(sock, 1)):
            time.sleep(delay)
            os.kill(os.getpid(), signal.SIGKILL)
    finally:
        os._exit(3)


def _post_until_failed(p2p: pmca.p2p.P2p, tag: int, errors: list[BaseException]) -> None:
    """Post receives from rank 1 without pause (up to 300) until one fails at once; all fail."""
    out = bytearray(64)
    posted = []
    try:
        while True:
            request = p2p.irecv(1, tag, out)
            posted.append(request)
            if request.done or len(posted) == 300:
                break
        for request in posted:
            with pytest.raises(PeerFailed, match="rank 1"):
                request.wait(timeout=60)
    except BaseException as exc:
        errors.append(exc)


@pytest.mark.skipif(sys.platform != "linux", reason="pidfd and sm are Linux only")
def test_peer_killed_while_two_threads_post_receives(pmca_env) -> None:
    rng = random.Random(24)
    switch = sys.getswitchinterval()
    sys.setswitchinterval(1e-4)  # threads interleave often enough to meet the race
    try:
        _rounds(rng)
    finally:
        sys.setswitchinterval(switch)


def _rounds(rng: random.Random) -> None:
    deadline = time.monotonic() + BUDGET
    for round_ in range(ROUNDS):
        assert time.monotonic() < deadline, f"only {round_} rounds within {BUDGET:g} s"
        mine, theirs = socket.socketpair()
        pid = os.fork()
        if pid == 0:  # pragma: no cover - the child
            mine.close()
            _child(theirs, rng.random() * 0.01)
        theirs.close()
        errors: list[BaseException] = []
        try:
            with pmca.Session(mca={"btl": "self,sm"}, world=PairWorld(mine, 0)) as s:
                threads = [
                    threading.Thread(target=_post_until_failed, args=(s.p2p, tag, errors))
                    for tag in (1, 2)
                ]
                for thread in threads:
                    thread.start()
                with pytest.raises(PeerFailed, match="rank 1"):  # this wait notices the death
                    s.p2p.probe(1, 99, timeout=60)
                for thread in threads:
                    thread.join(timeout=120)
                assert not any(thread.is_alive() for thread in threads), f"round {round_} hung"
        finally:
            _, status = os.waitpid(pid, 0)
        assert os.WIFSIGNALED(status) and os.WTERMSIG(status) == signal.SIGKILL, status
        assert not errors, f"round {round_}: {errors!r}"
