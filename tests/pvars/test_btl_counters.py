"""btl counters where each transport already handles a message: lanes, streams, rdma, threads.

Each pair test runs two real processes over a socket-pair world; the counts
are exact because each side reads them after a world barrier that follows
the traffic.
"""

from __future__ import annotations

import json
import textwrap
from typing import Any

import pytest

import pmca
from pmca.btl import FRAMEWORK
from pmca.btl.base import ModuleBase
from pmca.testing import run_pair

N = 29
B = 300
#: The message layer's match header, before every eager payload.
MATCH = 24

_HEAD = textwrap.dedent(
    """
    import contextlib, json, os, socket, sys, threading, time
    import pmca
    from pmca.btl import TAG_USER, Placement
    from pmca.world import PairWorld

    MCA = {mca!r}
    N, B = {n}, {b}
    NAMES = ("messages_sent", "bytes_sent", "messages_received", "bytes_received",
             "rdma_operations", "rdma_bytes", "peer_failures")

    def read(s, btl, peer, names=NAMES):
        ps = s.pvar_session()
        return {{n: ps.handle(f"btl_{{btl}}_{{n}}", obj=peer) for n in names}}

    def values(handles):
        return {{n: h.read() for n, h in handles.items()}}

    def barrier(world):
        world.allgather(b"", timeout=60)

    @contextlib.contextmanager
    def session(fd, rank):
        world = PairWorld(socket.socket(fileno=fd), rank)
        with pmca.Session(mca=MCA, frameworks=["btl"], world=world) as s:
            yield world, s, 1 - rank, s._data_path().bml
    """
)

_MAIN = """
if __name__ == "__main__":
    print(json.dumps(run(int(sys.argv[1]), 1)), flush=True)
"""


def _pair(tmp_path: Any, mca: dict[str, Any], body: str) -> tuple[dict[str, Any], dict[str, Any]]:
    mca = {**mca, "pmca_base_modex_timeout": 60}
    source = _HEAD.format(mca=mca, n=N, b=B) + textwrap.dedent(body) + _MAIN
    mine, out = run_pair(source, tmp_path)
    return mine, json.loads(out.strip().splitlines()[-1])


def _has_sm() -> bool:
    return any(ref.name == "sm" for ref in FRAMEWORK.static_components)


needs_sm = pytest.mark.skipif(not _has_sm(), reason="needs btl sm")

_LANES = """
def run(fd, rank):
    with session(fd, rank) as (world, s, peer, bml):
        buffer = bytearray(B)
        # Warm-up round trip (lanes open at the first use), then a barrier.
        if rank == 0:
            s.p2p.send(peer, 5, bytes(B)); s.p2p.recv(peer, 6, buffer)
        else:
            s.p2p.recv(peer, 5, buffer); s.p2p.send(peer, 6, bytes(B))
        # The lanes poll 20 us before a receive becomes a request; a loaded host
        # may not run the peer that soon in any round. What is counted, not how
        # long a lane spins, is under test: give the replies time to land.
        s.p2p._set_lane_spin(0.05)
        barrier(world)
        extra = ("lane_messages_sent", "lane_messages_received")
        handles = read(s, BTL, peer, NAMES + extra)
        for _ in range(N):  # blocking eager ping-pong: the lanes' own path
            if rank == 0:
                s.p2p.send(peer, 5, bytes(B)); s.p2p.recv(peer, 6, buffer)
            else:
                s.p2p.recv(peer, 5, buffer); s.p2p.send(peer, 6, bytes(B))
        barrier(world)
        eager = values(handles)
        handles = read(s, BTL, peer, NAMES + extra)
        big = 1 << 20
        for _ in range(3):  # rendezvous: the receiver reads each payload (CMA)
            if rank == 0:
                s.p2p.send(peer, 7, bytes(big))
            else:
                s.p2p.recv(peer, 7, bytearray(big))
        barrier(world)
        return {"eager": eager, "rendezvous": values(handles), "big": big}
"""


@pytest.mark.parametrize(
    "btl", [pytest.param("tcp", id="tcp"), pytest.param("sm", id="sm", marks=needs_sm)]
)
def test_lane_traffic_is_counted_with_the_engine_s(pmca_env, tmp_path, btl) -> None:
    rank0, rank1 = _pair(tmp_path, {"btl": f"self,{btl}"}, f"BTL = {btl!r}\n" + _LANES)
    for side in (rank0, rank1):
        eager = side["eager"]
        # Every message carries the match header and B bytes, whichever path it took.
        assert eager["messages_sent"] == N and eager["messages_received"] == N, eager
        assert eager["bytes_sent"] == eager["bytes_received"] == N * (MATCH + B), eager
        # Nothing queued ahead and fragments free: every blocking send took its lane.
        assert eager["lane_messages_sent"] == N, eager
        # A lane receive that waited past its spin becomes a request: the engine's.
        assert 0 <= eager["lane_messages_received"] <= N, eager
        assert eager["rdma_operations"] == eager["peer_failures"] == 0, eager
    # In a ping-pong the awaited message arrives within the spin: lanes land some.
    landed = rank0["eager"]["lane_messages_received"] + rank1["eager"]["lane_messages_received"]
    assert landed > 0, (rank0, rank1)
    if btl == "tcp":  # a large message is streamed, a rendezvous never takes a tcp lane
        for side in (rank0, rank1):
            assert side["rendezvous"]["lane_messages_sent"] == 0, side
        return
    big = rank1["big"]
    got, sent = rank1["rendezvous"], rank0["rendezvous"]
    # The receiver read each payload once (a lane with CMA, or the engine's get).
    assert got["rdma_operations"] == 3 and got["rdma_bytes"] == 3 * big, got
    assert sent["rdma_operations"] == 0 and sent["rdma_bytes"] == 0, sent
    # Rendezvous headers out, FINs back: active messages, not the payload.
    assert sent["messages_sent"] == 3 == got["messages_received"], (sent, got)
    assert got["messages_sent"] == 3 == sent["messages_received"], (sent, got)
    assert sent["bytes_sent"] < big, sent


_ENGINE = """
def run(fd, rank):
    with session(fd, rank) as (world, s, peer, bml):
        route = bml.peer(peer).send[0]
        module = route.module
        got = []
        module.register_recv(TAG_USER, lambda ep, tag, data: got.append(data.nbytes))
        barrier(world)
        handles = read(s, route.name, peer, NAMES + EXTRA)
        threads = [
            threading.Thread(target=lambda: [module.send(route.endpoint, TAG_USER, [bytes(B)])
                                             for _ in range(N)])
            for _ in range(THREADS)
        ]
        for thread in threads:
            thread.start()
        deadline = time.monotonic() + 60
        # Until everything arrived and this side's queued sends went out too.
        while (len(got) < THREADS * N or module._queued or any(t.is_alive() for t in threads)
               ) and time.monotonic() < deadline:
            bml.progress()
        for thread in threads:
            thread.join()
        barrier(world)
        return {"btl": route.name, "values": values(handles), "got": len(got)}
"""


@needs_sm
def test_sm_engine_sends_from_several_threads_are_counted_exactly(pmca_env, tmp_path) -> None:
    """sm's sends take the module's lock; the C counters are added to under it."""
    threads = 4
    body = f"THREADS = {threads}\nEXTRA = ('lane_messages_sent', 'lane_messages_received')\n"
    rank0, rank1 = _pair(tmp_path, {"btl": "self,sm"}, body + _ENGINE)
    for side in (rank0, rank1):
        values = side["values"]
        assert side["btl"] == "sm" and side["got"] == threads * N
        assert values["messages_sent"] == values["messages_received"] == threads * N, values
        assert values["bytes_sent"] == values["bytes_received"] == threads * N * B, values
        # Straight to the module: no lane took part.
        assert values["lane_messages_sent"] == values["lane_messages_received"] == 0, values


_THREADS_P2P = """
def run(fd, rank):
    with session(fd, rank) as (world, s, peer, bml):
        btl = bml.peer(peer).send[0].name
        barrier(world)
        handles = read(s, btl, peer)
        if rank == 0:
            def sender(tag):
                for _ in range(N):
                    s.p2p.send(peer, tag, bytes(B))
            threads = [threading.Thread(target=sender, args=(tag,)) for tag in range(THREADS)]
            for thread in threads:
                thread.start()
            for thread in threads:
                thread.join()
        else:
            buffer = bytearray(B)
            for tag in range(THREADS):
                for _ in range(N):
                    s.p2p.recv(peer, tag, buffer)
        barrier(world)
        return {"btl": btl, "values": values(handles)}
"""


@pytest.mark.parametrize(
    ("mca", "btl"),
    [
        pytest.param({"btl": "self,tcp"}, "tcp", id="tcp"),
        pytest.param({"btl": "self,sm"}, "sm", id="sm", marks=needs_sm),
    ],
)
def test_p2p_sends_from_several_threads_are_counted_exactly(pmca_env, tmp_path, mca, btl) -> None:
    """p2p holds the bml's lock around every btl call: counts under it are exact."""
    threads = 4
    rank0, rank1 = _pair(tmp_path, mca, f"THREADS = {threads}\n" + _THREADS_P2P)
    sent, got = rank0["values"], rank1["values"]
    assert rank0["btl"] == rank1["btl"] == btl
    assert sent["messages_sent"] == got["messages_received"] == threads * N, (sent, got)
    assert sent["bytes_sent"] == got["bytes_received"] == threads * N * (MATCH + B), (sent, got)


_STREAMS = """
PLACED, STAGED, L = 5, 3, 100_000

def run(fd, rank):
    with session(fd, rank) as (world, s, peer, bml):
        route = bml.peer(peer).send[0]
        module = route.module
        staged, placed = [], []

        def place(endpoint, tag, head, length):
            if head[0] != 1:
                return None  # delivered whole, from a buffer of its own
            return Placement(0, memoryview(bytearray(length)), placed.append)

        module.register_recv(TAG_USER, lambda ep, tag, data: staged.append(data.nbytes))
        module.register_placer(TAG_USER, place)
        barrier(world)
        names = NAMES + ("streams_placed", "streams_staged")
        handles = read(s, "tcp", peer, names)
        if rank == 0:
            for marker, count in ((1, PLACED), (0, STAGED)):
                for _ in range(count):
                    module.send(route.endpoint, TAG_USER, [bytes([marker]) + bytes(L - 1)])
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and (
            rank == 1 and len(placed) + len(staged) < PLACED + STAGED
            or rank == 0 and any(c.queue for c in module._connections.values())
        ):
            bml.progress()
        barrier(world)
        return {"values": values(handles), "placed": len(placed), "staged": len(staged),
                "counts": [PLACED, STAGED, L]}
"""


def test_tcp_counts_large_messages_placed_and_staged(pmca_env, tmp_path) -> None:
    rank0, rank1 = _pair(tmp_path, {"btl": "self,tcp"}, _STREAMS)
    placed, staged, length = rank1["counts"]
    assert (rank1["placed"], rank1["staged"]) == (placed, staged)
    got, sent = rank1["values"], rank0["values"]
    assert (got["streams_placed"], got["streams_staged"]) == (placed, staged), got
    assert got["messages_received"] == placed + staged, got
    assert got["bytes_received"] == (placed + staged) * length, got
    assert sent["messages_sent"] == placed + staged, sent
    assert sent["bytes_sent"] == (placed + staged) * length, sent
    assert sent["streams_placed"] == sent["streams_staged"] == 0, sent


_FAILURE = """
def run(fd, rank):
    with session(fd, rank) as (world, s, peer, bml):
        handles = read(s, "tcp", peer, ("peer_failures",))
        barrier(world)
        if rank == 1:
            print(json.dumps({"values": values(handles)}), flush=True)
            os._exit(0)  # gone without a goodbye: the peer sees its connection end
        deadline = time.monotonic() + 60
        while handles["peer_failures"].read() == 0 and time.monotonic() < deadline:
            bml.progress()
            time.sleep(0.01)
        return {"values": values(handles)}
"""


def test_tcp_counts_a_peer_lost(pmca_env, tmp_path) -> None:
    rank0, _rank1 = _pair(tmp_path, {"btl": "self,tcp"}, _FAILURE)
    assert rank0["values"]["peer_failures"] == 1


def test_self_counts_eager_messages_and_its_gets(pmca_env) -> None:
    with pmca.Session(mca={"btl": "self"}, frameworks=["btl"]) as s:
        ps = s.pvar_session()
        names = ("messages_sent", "bytes_sent", "messages_received", "bytes_received")
        handles = {n: ps.handle(f"btl_self_{n}", obj=0) for n in names}
        rdma = ps.handle("btl_self_rdma_bytes", obj=0)
        buffer = bytearray(B)
        for _ in range(N):
            s.p2p.send(0, 3, bytes(B))
            s.p2p.recv(0, 3, buffer)
        counted = {n: h.read() for n, h in handles.items()}
        assert counted == {
            "messages_sent": N,
            "bytes_sent": N * (MATCH + B),
            "messages_received": N,
            "bytes_received": N * (MATCH + B),
        }
        big = 1 << 20
        target = bytearray(big)
        request = s.p2p.irecv(0, 4, target)
        s.p2p.send(0, 4, bytes(big))
        request.wait(timeout=60)
        assert rdma.read() == big


class _Plain(ModuleBase):
    """A third-party module that counts nothing itself."""

    def sendi(self, endpoint: Any, tag: int, parts: Any) -> bool:
        return tag != 9  # refuses tag 9: not counted

    def send(self, endpoint: Any, tag: int, parts: Any, callback: Any = None) -> None:
        return None


class _Peer:
    rank = 3


def test_a_module_that_does_not_count_is_counted_by_a_wrapper() -> None:
    import structlog

    from pmca.btl import Flags, Limits

    limits = Limits(1, 1, 1, 1024, 0, 1024, Flags(0))
    module = _Plain("plainwrap", limits, structlog.get_logger())
    module.send(_Peer(), 1, [b"abc", bytearray(5)])
    assert module.sendi(_Peer(), 1, [b"xy"])
    assert not module.sendi(_Peer(), 9, [b"xy"])
    assert module.counter("messages_sent", 3) == 2
    assert module.counter("bytes_sent", 3) == 10


def test_built_in_modules_count_at_their_own_call_sites() -> None:
    """No per-message wrapper around the built-in modules' sends."""
    from pmca.btl.self import SelfModule
    from pmca.btl.tcp import TcpModule

    modules = [SelfModule, TcpModule]
    if _has_sm():
        from pmca.btl.sm import SmModule

        modules.append(SmModule)
    for cls in modules:
        assert cls.counts_own_sends, cls
        assert not hasattr(cls.send, "__wrapped__") and not hasattr(cls.sendi, "__wrapped__")


_KEPT = """
import gc, weakref

def run(fd, rank):
    with session(fd, rank) as (world, s, peer, bml):
        handles = read(s, BTL, peer, NAMES + EXTRA)
        buffer, big = bytearray(B), 1 << 20
        for size in (B,) * N + (big, big):  # eager, then rendezvous
            if rank == 0:
                s.p2p.send(peer, 5, bytes(size))
                s.p2p.recv(peer, 6, buffer)
            else:
                s.p2p.recv(peer, 5, bytearray(size))
                s.p2p.send(peer, 6, bytes(B))
        barrier(world)
        during = values(handles)
        modules = [weakref.ref(m) for m in bml.modules]
    finalized = values(handles)  # leaving may have sent a few more
    del world, s, bml
    gc.collect()
    return {"during": during, "finalized": finalized, "collected": values(handles),
            "alive": [m().name for m in modules if m() is not None]}
"""


@pytest.mark.parametrize(
    ("mca", "btl", "extra"),
    [
        pytest.param({"btl": "self,tcp"}, "tcp", ("streams_placed", "streams_staged"), id="tcp"),
        pytest.param(
            {"btl": "self,sm"},
            "sm",
            ("lane_messages_sent", "lane_messages_received"),
            id="sm",
            marks=needs_sm,
        ),
    ],
)
def test_counters_keep_a_finalized_module_s_counts(pmca_env, tmp_path, mca, btl, extra) -> None:
    """A module's counts outlive it: after the session's finalize and a collection
    that frees its modules, every counter reads what it read when they closed
    (the lane counters sm keeps in C and its Python ones alike)."""
    rank0, rank1 = _pair(tmp_path, mca, f"BTL, EXTRA = {btl!r}, {extra!r}\n" + _KEPT)
    for side in (rank0, rank1):
        during, finalized = side["during"], side["finalized"]
        assert side["alive"] == [], side  # every module was collected
        assert side["collected"] == finalized, side
        assert all(finalized[name] >= during[name] for name in during), side
        assert during["messages_sent"] >= N + 2 and during["messages_received"] >= N + 2, side
    # The component's own counters held counts too (sm's lanes count in C, in a
    # page the module owned; tcp's large messages were placed).
    assert sum(rank0["during"][name] + rank1["during"][name] for name in extra) > 0
    # The two large payloads went as active messages (tcp's streams) or were read (sm).
    moved = rank0["during"]["bytes_sent"] + rank1["during"]["rdma_bytes"]
    assert moved >= 2 << 20, (rank0, rank1)
