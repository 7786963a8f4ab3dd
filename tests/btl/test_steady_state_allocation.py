"""No allocation per message in a ping-pong's steady state, on every p2p path.

Each path (a blocking ``send``/``recv``, which takes a btl's lane on sm and
tcp; ``isend``/``irecv`` + ``wait``, the general path of requests; the self
btl) ping-pongs bytearrays and numpy ``uint8`` arrays under ``tracemalloc``,
after a warm-up, in windows of ``ROUNDS`` round trips. Two things are
measured per window, both as tracemalloc sees them (every Python object and
buffer):

* what the window left allocated (``gc.collect`` at both ends): a message
  that keeps anything grows it by at least the smallest object, 16 bytes, per
  message, so the least growth of the windows stays under a bound far below
  that (a one-off, a dict that resizes once, shows in one window only);
* the peak above the window's start: what a message allocates and frees
  meanwhile. A per-message copy of the payload (a bytes object made of a
  bytearray, a staging copy that is allocated) makes the peak of 4 KiB
  messages exceed the 8-byte one by the payload; the paths' own objects (a
  request, an int above 256) are the same for both sizes, so the difference
  stays under half the payload.

``PMCA_STEADY_ROUNDS`` sets the window: 100 000 round trips is the long check;
the suite's 300 (two messages a round trip on each side) already turn 8 bytes
kept per message into 4.7 KiB per window, above the bound.
"""

from __future__ import annotations

import importlib.util
import inspect
import os

import pytest

import pmca

from . import _steady
from ._pairs import BTLS
from ._pairs import pair as _pair
from ._steady import buffers, measure

ROUNDS = int(os.environ.get("PMCA_STEADY_ROUNDS", "300"))
#: The payload whose copy the peak would show, and the one that shows none.
LARGE, SMALL = 4096, 8
#: Growth a window may show at least once: far below one object per message.
GROWTH = 4096
#: Round trips before tracing: twice :func:`_steady.measure`'s warm-up.
WARM = 2 * min(ROUNDS, 200)
#: How long a pair of ranks may take: the suite's windows need far less; the
#: long check's 1.6 million traced round trips per rank take their own time.
PAIR_TIMEOUT = max(600.0, ROUNDS * 0.04)

_PAIR = """
ROUNDS, LARGE, SMALL = int(sys.argv[4]), int(sys.argv[5]), int(sys.argv[6])
try:
    import numpy
    KINDS = ["bytearray", "numpy"]
except ImportError:
    KINDS = ["bytearray"]
with pmca.Session(mca=MCA, frameworks=["btl"], world=WORLD) as s:
    p2p, peer = s.p2p, 1 - RANK
    # a lane receive that waited past its spin becomes a request: let the
    # peer, on a loaded host, answer within the spin, so the lanes are measured
    p2p._set_lane_spin(0.05)
    btl = BTL.split(",")[-1]
    sent = s.pvar_session().handle(f"btl_{btl}_lane_messages_sent", obj=peer)
    facts = {}
    for kind in KINDS:
        sizes = {True: buffers(kind, SMALL), False: buffers(kind, LARGE)}
        for path in ("lane", "requests"):
            def rounds(count, small, path=path, sizes=sizes):
                out, into = sizes[small]
                for _ in range(count):
                    if path == "lane":
                        if RANK == 0:
                            p2p.send(peer, 5, out)
                            p2p.recv(peer, 6, into)
                        else:
                            p2p.recv(peer, 5, into)
                            p2p.send(peer, 6, out)
                    elif RANK == 0:
                        reply = p2p.irecv(peer, 6, into)
                        p2p.isend(peer, 5, out).wait()
                        reply.wait()
                    else:
                        p2p.irecv(peer, 5, into).wait()
                        p2p.isend(peer, 6, out).wait()
            before = sent.read()
            facts[f"{kind} {path}"] = measure(rounds, ROUNDS)
            facts[f"{kind} {path} lane sends"] = sent.read() - before
    WORLD.barrier(timeout=60)
    out(facts=facts)
"""


def _judge(facts: dict, where: str) -> None:
    """Each path's least growth and its peak's rise with the payload, within bounds."""
    for key, windows in facts.items():
        if not isinstance(windows, list):
            continue
        growth = min(window[0] for window in windows[1:])
        assert growth < GROWTH, f"{where} {key}: {growth} bytes kept per window {windows}"
        small_peak = windows[0][1]
        rise = min(window[1] for window in windows[1:]) - small_peak
        assert rise < LARGE // 2, (
            f"{where} {key}: {LARGE}-byte messages allocate {rise} bytes more than "
            f"{SMALL}-byte ones (a copy of the payload per message?) {windows}"
        )


@pytest.mark.parametrize("btl", BTLS)
def test_two_ranks_allocate_nothing_per_message(pmca_env, tmp_path, btl) -> None:
    """sm or tcp, lanes and requests, bytearrays and numpy: no growth, no payload copy.

    With the lane's send copying a bytearray to bytes (as it did), or sm's
    general send copying a small body to bytes (as it did), the peak of 4 KiB
    messages rose by the payload; with a list that keeps each message's size
    the growth was 112 KiB per window.
    """
    # after the prelude, where a __future__ import may not stand
    measurement = inspect.getsource(_steady).replace("from __future__ import annotations", "")
    program = measurement + _PAIR
    results = _pair(
        tmp_path, program, btl, str(ROUNDS), str(LARGE), str(SMALL), timeout=PAIR_TIMEOUT
    )
    for side in results:
        assert side["returncode"] == 0, side
        facts = side["facts"]
        _judge(facts, f"{btl} rank {side['rank']}")
        # every blocking send of the lane path took the lane (warm-ups and windows)
        for kind in ("bytearray", "numpy"):
            if f"{kind} lane" in facts:
                assert facts[f"{kind} lane lane sends"] == WARM + ROUNDS * 3 + ROUNDS // 10 + 1, (
                    facts
                )
                assert facts[f"{kind} requests lane sends"] == 0, facts


def test_the_self_btl_allocates_nothing_per_message(pmca_env) -> None:
    """A receive posted, then a blocking send to this rank, then the receive's wait."""
    kinds = ["bytearray"] + (["numpy"] if importlib.util.find_spec("numpy") else [])
    facts = {}
    with pmca.Session(mca={"btl": "self"}, frameworks=["btl"]) as s:
        p2p = s.p2p
        for kind in kinds:
            sizes = {True: buffers(kind, SMALL), False: buffers(kind, LARGE)}

            def rounds(count: int, small: bool, sizes: dict = sizes) -> None:
                out, into = sizes[small]
                for _ in range(count):
                    request = p2p.irecv(0, 5, into)
                    p2p.send(0, 5, out)
                    request.wait()

            facts[kind] = measure(rounds, ROUNDS)
    _judge(facts, "self")
