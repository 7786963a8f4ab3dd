"""Pvar registration and MPI_T handle semantics over a producer's own counters."""

from __future__ import annotations

import pytest

import pmca
from pmca.mca import (
    Binding,
    PVarClass,
    PVarError,
    PVarFlag,
    PVarGroup,
    PVarRegistry,
    PVarSession,
)


class _Producer:
    """Counters as a producer keeps them: plain attributes its hot path bumps."""

    def __init__(self) -> None:
        self.count = 0
        self.per_peer = {0: 0, 1: 0}
        self.level = 0
        self.peak = 0

    def queue(self, n: int) -> None:
        self.level = n
        self.peak = max(self.peak, n)


@pytest.fixture
def produced() -> tuple[PVarRegistry, _Producer]:
    registry = PVarRegistry()
    p = _Producer()
    registry.register(
        "btl", "demo", "sends", PVarClass.COUNTER, lambda _o: p.count, description="sends"
    )
    registry.register(
        "btl",
        "demo",
        "bytes_sent",
        PVarClass.COUNTER,
        lambda rank: p.per_peer[rank],
        binding=Binding.PEER,
        objects=lambda: list(p.per_peer),
        flags=PVarFlag.CONTINUOUS,
        unit="bytes",
        description="bytes per peer",
    )
    registry.register(
        "p2p",
        "demo",
        "queue_high",
        PVarClass.HIGHWATERMARK,
        lambda _o: p.level,
        peak=lambda _o: p.peak,
        description="queue length",
    )
    registry.register(
        "memory",
        "demo",
        "support",
        PVarClass.STATE,
        lambda _o: 2,
        flags=PVarFlag.READONLY | PVarFlag.CONTINUOUS,
        description="support level",
    )
    return registry, p


def test_non_continuous_counts_only_while_started(produced) -> None:
    registry, p = produced
    p.count = 10  # traffic before the session
    h = PVarSession(registry).handle("btl_demo_sends")
    p.count += 5
    assert h.read() == 0  # never started
    h.start()
    p.count += 3
    assert h.read() == 3
    h.stop()
    p.count += 100
    assert h.read() == 3
    h.start()
    p.count += 1
    assert h.read() == 4


def test_continuous_reads_what_came_after_the_handle(produced) -> None:
    registry, p = produced
    p.per_peer[1] = 1000
    ps = PVarSession(registry)
    h = ps.handle("btl_demo_bytes_sent", obj=1)
    p.per_peer[1] += 24
    p.per_peer[0] += 7  # another peer
    assert h.read() == 24
    assert h.readreset() == 24
    assert h.read() == 0
    p.per_peer[1] += 2
    assert h.read() == 2
    with pytest.raises(PVarError, match="continuous"):
        h.stop()
    # Two sessions never disturb each other.
    other = PVarSession(registry).handle("btl_demo_bytes_sent", obj=1)
    h.reset()
    p.per_peer[1] += 5
    assert (h.read(), other.read()) == (5, 5)


def test_watermark_sees_a_peak_between_reads(produced) -> None:
    registry, p = produced
    p.queue(50)  # a peak before the handle started
    p.queue(1)
    h = PVarSession(registry).handle("p2p_demo_queue_high")
    h.start()
    assert h.read() == 1
    p.queue(7)
    p.queue(2)  # the 7 was never sampled, the producer's peak did not move past 50
    p.queue(60)
    p.queue(0)
    assert h.read() == 60
    h.reset()
    assert h.read() == 0


def test_low_watermark_sees_a_trough_between_reads() -> None:
    registry = PVarRegistry()
    level = {"now": 10, "trough": 10}
    registry.register(
        "p2p",
        "demo",
        "free_slots",
        PVarClass.LOWWATERMARK,
        lambda _o: level["now"],
        peak=lambda _o: level["trough"],
        description="free slots",
    )
    h = PVarSession(registry).handle("p2p_demo_free_slots")
    h.start()
    assert h.read() == 10
    level.update(now=2, trough=2)  # a trough no read saw
    level["now"] = 7
    assert h.read() == 2
    h.reset()
    assert h.read() == 7
    level["now"] = 5
    assert h.read() == 5


def test_a_sweep_reads_what_each_handle_reads(produced) -> None:
    registry, p = produced
    ps = PVarSession(registry)
    sends = ps.handle("btl_demo_sends")
    sends.start()
    peers = [ps.handle("btl_demo_bytes_sent", obj=rank) for rank in (0, 1)]
    high = ps.handle("p2p_demo_queue_high")
    high.start()
    state = ps.handle("memory_demo_support")
    p.count += 3
    p.per_peer[1] += 40
    p.queue(9)
    p.queue(4)
    assert ps.read_all() == [3, 0, 40, 9, 2]
    assert ps.read_all() == [h.read() for h in (sends, *peers, high, state)]
    sends.stop()
    p.count += 100
    assert ps.read_all()[0] == 3
    ps.free()
    with pytest.raises(PVarError, match="freed"):
        ps.read_all()


def test_a_sweep_follows_every_change_of_its_handles(produced) -> None:
    registry, p = produced
    ps = PVarSession(registry)
    sends = ps.handle("btl_demo_sends")
    peer = ps.handle("btl_demo_bytes_sent", obj=1)
    assert ps.read_all() == [0, 0]
    sends.start()
    p.count += 2
    p.per_peer[1] += 5
    assert ps.read_all() == [2, 5]
    peer.reset()
    p.per_peer[1] += 1
    assert ps.read_all() == [2, 1]
    assert peer.readreset() == 1
    assert ps.read_all() == [2, 0]
    peer.write(100)
    assert ps.read_all() == [2, 100]
    sends.stop()
    p.count += 7
    assert ps.read_all() == [2, 100]
    sends.start()
    p.count += 1
    assert ps.read_all() == [3, 100]
    late = ps.handle("memory_demo_support")
    assert ps.read_all() == [3, 100, 2]
    # Another producer registered for a name: the sweep reads what read() reads.
    registry.register(
        "btl", "demo", "sends", PVarClass.COUNTER, lambda _o: 1000, description="sends"
    )
    swept = ps.read_all()
    assert swept == [h.read() for h in (sends, peer, late)]
    assert swept[0] != 3


def test_a_sweep_reads_a_group_once_per_object() -> None:
    registry = PVarRegistry()
    counters = {0: [1, 2], 1: [10, 20]}
    reads: list[object] = []

    def read_group(rank: object) -> list[int]:
        reads.append(rank)
        return list(counters[rank])  # type: ignore[index]

    group = PVarGroup(read_group)
    for index, name in enumerate(("sent", "received")):
        registry.register(
            "btl",
            "grouped",
            name,
            PVarClass.COUNTER,
            lambda rank, i=index: counters[rank][i],
            binding=Binding.PEER,
            objects=lambda: [0, 1],
            flags=PVarFlag.CONTINUOUS,
            group=group.field(index),
            description=name,
        )
    ps = PVarSession(registry)
    handles = [ps.handle(f"btl_grouped_{n}", obj=r) for r in (0, 1) for n in ("sent", "received")]
    for rank in (0, 1):
        counters[rank] = [v + 5 * (rank + 1) for v in counters[rank]]
    reads.clear()
    assert ps.read_all() == [5, 5, 10, 10]
    assert sorted(reads) == [0, 1]  # one group read per peer for both of its pvars
    assert ps.read_all() == [h.read() for h in handles]


def test_a_sweep_takes_a_watermark_from_its_group() -> None:
    registry = PVarRegistry()
    queues = {"posted": 0, "unexpected": 0, "peak": 0}
    reads: list[object] = []

    def read_group(_obj: object) -> list[int]:
        reads.append(_obj)
        return [queues["posted"], queues["unexpected"]]

    group = PVarGroup(read_group)
    registry.register(
        "p2p",
        "grouped",
        "posted",
        PVarClass.LEVEL,
        lambda _o: queues["posted"],
        flags=PVarFlag.CONTINUOUS,
        group=group.field(0),
        description="posted",
    )
    registry.register(
        "p2p",
        "grouped",
        "unexpected",
        PVarClass.HIGHWATERMARK,
        lambda _o: queues["unexpected"],
        peak=lambda _o: queues["peak"],
        group=group.field(1),
        description="unexpected",
    )

    def arrive(n: int) -> None:
        queues["unexpected"] = n
        queues["peak"] = max(queues["peak"], n)

    ps = PVarSession(registry)
    posted, high = ps.handle("p2p_grouped_posted"), ps.handle("p2p_grouped_unexpected")
    arrive(3)
    high.start()
    queues["posted"] = 2
    arrive(9)  # a peak between two sweeps
    arrive(4)
    reads.clear()
    assert ps.read_all() == [2, 9]
    assert reads == [None]  # both from one read of the group
    assert ps.read_all() == [posted.read(), high.read()] == [2, 9]
    high.reset()
    assert ps.read_all() == [2, 4]
    arrive(6)
    assert ps.read_all() == [2, 6]
    high.stop()
    arrive(20)
    assert ps.read_all() == [2, 6]  # a stopped watermark keeps its mark


def test_errors_name_what_was_wrong(produced) -> None:
    registry, _ = produced
    ps = PVarSession(registry)
    with pytest.raises(PVarError, match="no performance variable named 'btl_demo_nope'"):
        ps.handle("btl_demo_nope")
    with pytest.raises(PVarError, match="bound per peer: 5 is not one of"):
        ps.handle("btl_demo_bytes_sent", obj=5)
    with pytest.raises(PVarError, match="not bound to anything"):
        ps.handle("btl_demo_sends", obj=1)
    state = ps.handle("memory_demo_support")
    assert state.read() == 2
    with pytest.raises(PVarError, match="read-only"):
        state.reset()
    with pytest.raises(PVarError, match="read-only"):
        state.write(1)
    with pytest.raises(PVarError, match="level 12"):
        registry.register(
            "btl", "demo", "x", PVarClass.COUNTER, lambda _o: 0, level=12, description="x"
        )
    with pytest.raises(PVarError, match="registered again"):
        registry.register(
            "btl", "demo", "sends", PVarClass.LEVEL, lambda _o: 0, description="sends"
        )
    ps.free()
    with pytest.raises(PVarError, match="freed"):
        state.read()


def test_session_lists_pvars_and_times_itself(pmca_env) -> None:
    with pmca.Session(frameworks=["memory"]) as s:
        names = {pv.name: pv for pv in s.pvars()}
        init = names["pmca_session_init_time"]
        assert (init.klass, init.unit, init.binding) == (PVarClass.TIMER, "seconds", Binding.NONE)
        h = s.pvar_session().handle("pmca_session_init_time")
        with pmca.Session(frameworks=["memory"]):
            pass
        assert h.read() > 0


def test_start_stop_and_free_notify_the_producer() -> None:
    registry = PVarRegistry()
    calls: list[bool] = []
    elapsed = [0.0]
    registry.register(
        "p2p",
        "demo",
        "busy_time",
        PVarClass.TIMER,
        lambda _o: elapsed[0],
        type="float",
        unit="seconds",
        notify=calls.append,
        description="time, measured while started",
    )
    first, second = PVarSession(registry), PVarSession(registry)
    a = first.handle("p2p_demo_busy_time")
    b = second.handle("p2p_demo_busy_time")
    assert calls == []  # a handle starts stopped: nothing to measure yet
    a.start()
    a.start()  # already started: no second notice
    b.start()
    elapsed[0] = 1.5
    a.stop()
    assert a.read() == 1.5
    second.free()  # b was still started: freeing stops it
    assert calls == [True, True, False, False]
    with pytest.raises(PVarError, match="continuous pvar is never started"):
        registry.register(
            "p2p",
            "demo",
            "always",
            PVarClass.COUNTER,
            lambda _o: 0,
            flags=PVarFlag.CONTINUOUS,
            notify=calls.append,
            description="always counting",
        )


def test_a_handle_reads_the_producer_registered_last() -> None:
    """A handle reads its one producer directly after its first read; a producer
    registered again afterwards (a component imported afresh) is the one it reads."""
    registry = PVarRegistry()
    old, new = [7], [100]
    registry.register("btl", "demo", "sent", PVarClass.LEVEL, lambda _o: old[0], description="d")
    session = PVarSession(registry)
    handle = session.handle("btl_demo_sent")
    assert handle.read() == 7
    old[0] = 8
    assert handle.read() == 8  # read through the kept producer
    registry.register("btl", "demo", "sent", PVarClass.LEVEL, lambda _o: new[0], description="d")
    assert handle.read() == 100
    new[0] = 101
    assert handle.read() == 101
    session.free()
    with pytest.raises(PVarError, match="freed"):
        handle.read()


def test_producers_forget_an_object_that_went_away() -> None:
    import gc

    from pmca.mca._pvars import Producers

    class Module:
        def __init__(self, count: int) -> None:
            self.count = count

    producers: Producers[Module, None] = Producers(None, lambda kept, _module: kept)
    kept, dropped = Module(1), Module(2)
    producers.add(kept)
    producers.add(dropped)
    producers.add(kept)  # once only
    assert [m.count for m in producers] == [1, 2]
    del dropped
    gc.collect()
    assert len(producers.refs) == 1
    assert producers.live() == [kept]


_COLLECTED_INSIDE_ADD = """
import gc, threading
from pmca.mca._pvars import Producers

threading.Thread(target=lambda: None).start()  # as a session's process is
producers = Producers(None, lambda kept, _module: kept)

class Module:
    pass

for threshold in range(1, 40):
    gc.collect()  # the collector's count starts at 0 each round
    old = Module()
    old.cycle = old  # freed only by the collector
    producers.add(old)
    del old
    new = Module()
    gc.set_threshold(threshold)  # some round collects it inside add's lock
    producers.add(new)
    gc.set_threshold(700)
print("ok", len(producers.live()))
"""


def test_a_producer_collected_inside_add_does_not_deadlock() -> None:
    """A module in a reference cycle, freed by a collection that add's own
    allocation starts while it holds its lock: the weak reference's callback
    runs on that thread, and must not wait for the lock (it hung every dso
    session that opened while an earlier one's modules awaited collection)."""
    import subprocess
    import sys

    child = subprocess.run(
        [sys.executable, "-c", _COLLECTED_INSIDE_ADD], capture_output=True, text=True, timeout=60
    )
    assert child.returncode == 0 and child.stdout.startswith("ok"), child
