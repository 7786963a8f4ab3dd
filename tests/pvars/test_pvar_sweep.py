"""A sweep (``PVarSession.read_all``) gives what every handle's ``read()`` gives.

The sweep is a function generated per shape of session, fed lists of
offsets and reads that are made again whenever a handle or a producer
changes; these tests drive every change a tool can make, in any order,
and compare the sweep with the handles read one by one.
"""

from __future__ import annotations

from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

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
    """A counter, a float timer, a level with its extremes, per-peer counters and a state."""

    def __init__(self) -> None:
        self.count = 0
        self.seconds = 0.0
        self.level = 0
        self.peak = 0
        self.trough = 0
        self.per_peer = {0: 0, 1: 0}
        self.state = 1
        self.group_reads = 0

    def values(self, _obj: object) -> list[float]:
        self.group_reads += 1
        return [self.count, self.seconds, self.level]


class _Owner:
    """What owns the state pvar's source (held weakly: read through the registry)."""


def _registry(p: _Producer, owner: _Owner) -> PVarRegistry:
    registry = PVarRegistry()
    group = PVarGroup(p.values)
    registry.register(
        "btl",
        "demo",
        "count",
        PVarClass.COUNTER,
        lambda _o: p.count,
        group=group.field(0),
        description="a counter of the group",
    )
    registry.register(
        "btl",
        "demo",
        "seconds",
        PVarClass.TIMER,
        lambda _o: p.seconds,
        type="float",
        flags=PVarFlag.CONTINUOUS,
        group=group.field(1),
        description="a float timer of the group",
    )
    registry.register(
        "btl",
        "demo",
        "level",
        PVarClass.HIGHWATERMARK,
        lambda _o: p.level,
        peak=lambda _o: p.peak,
        group=group.field(2),
        description="a watermark of the group",
    )
    registry.register(
        "btl",
        "demo",
        "low",
        PVarClass.LOWWATERMARK,
        lambda _o: p.level,
        peak=lambda _o: p.trough,
        group=group.field(2),
        description="a low watermark of the group",
    )
    registry.register(
        "btl",
        "demo",
        "now",
        PVarClass.LEVEL,
        lambda _o: p.level,
        flags=PVarFlag.READONLY | PVarFlag.CONTINUOUS,
        description="a level read alone",
    )
    registry.register(
        "btl",
        "demo",
        "bytes",
        PVarClass.COUNTER,
        lambda rank: p.per_peer[rank],
        binding=Binding.PEER,
        objects=lambda: list(p.per_peer),
        flags=PVarFlag.CONTINUOUS,
        description="per peer, read alone",
    )
    registry.register(
        "btl",
        "demo",
        "state",
        PVarClass.STATE,
        lambda _o: p.state,
        owner=owner,
        flags=PVarFlag.READONLY | PVarFlag.CONTINUOUS,
        description="a state whose producer has an owner (no fast path)",
    )
    return registry


_HANDLES = [
    ("btl_demo_count", None),
    ("btl_demo_seconds", None),
    ("btl_demo_level", None),
    ("btl_demo_low", None),
    ("btl_demo_now", None),
    ("btl_demo_bytes", 0),
    ("btl_demo_bytes", 1),
    ("btl_demo_state", None),
]

_OPERATIONS = st.lists(
    st.tuples(
        st.sampled_from(
            ["traffic", "start", "stop", "reset", "readreset", "write", "handle", "producer"]
        ),
        st.integers(0, len(_HANDLES) - 1),
        st.integers(0, 50),
    ),
    max_size=40,
)


@settings(max_examples=150, deadline=None)
@given(_OPERATIONS)
def test_a_sweep_equals_the_reads_through_any_changes(operations: list[Any]) -> None:
    p, owner = _Producer(), _Owner()
    registry = _registry(p, owner)
    ps = PVarSession(registry)
    handles = [ps.handle(name, obj) for name, obj in _HANDLES[:3]]
    for operation, which, amount in operations:
        handle = handles[which % len(handles)]
        try:
            if operation == "traffic":
                p.count += amount
                p.seconds += amount * 0.001
                p.level = amount
                p.peak = max(p.peak, amount)
                p.trough = min(p.trough, amount - 25)  # lower than any level it saw
                p.per_peer[which % 2] += amount
                p.state = amount % 3
            elif operation == "start":
                handle.start()
            elif operation == "stop":
                handle.stop()
            elif operation == "reset":
                handle.reset()
            elif operation == "readreset":
                handle.readreset()
            elif operation == "write":
                handle.write(amount)
            elif operation == "handle":
                handles.append(ps.handle(*_HANDLES[which]))
            else:  # another producer for the counter: every sweep must read the new one
                registry.register(
                    "btl",
                    "demo",
                    "count",
                    PVarClass.COUNTER,
                    lambda _o, a=amount: p.count + a,
                    description="a counter read alone now",
                )
        except PVarError:
            pass  # continuous, read-only or not writable: refused, nothing changed
        assert ps.read_all() == [h.read() for h in handles]


def test_a_group_is_read_once_per_sweep_however_many_members() -> None:
    p, owner = _Producer(), _Owner()
    ps = PVarSession(_registry(p, owner))
    for name, obj in _HANDLES * 3:  # each member three times over
        handle = ps.handle(name, obj)
        if not handle.running:
            handle.start()
    ps.read_all()
    p.group_reads = 0
    ps.read_all()
    assert p.group_reads == 1


def test_an_unhashable_object_is_read_alone() -> None:
    registry = PVarRegistry()
    peers = [[1, 2], [3, 4]]

    def read_group(obj: list[int]) -> list[int]:
        return list(obj)

    group = PVarGroup(read_group)
    for index, name in enumerate(("sent", "received")):
        registry.register(
            "btl",
            "lists",
            name,
            PVarClass.COUNTER,
            lambda obj, i=index: obj[i],
            binding=Binding.PEER,
            objects=lambda: peers,
            flags=PVarFlag.CONTINUOUS,
            group=group.field(index),
            description=name,
        )
    ps = PVarSession(registry)
    names = ("btl_lists_sent", "btl_lists_received")
    handles = [ps.handle(name, obj=peer) for peer in peers for name in names]
    peers[0][0] += 5
    peers[1][1] += 7
    assert ps.read_all() == [5, 0, 0, 7] == [h.read() for h in handles]


def test_many_handles_in_one_sweep() -> None:
    registry = PVarRegistry()
    counts = list(range(2000))
    registry.register(
        "btl",
        "wide",
        "count",
        PVarClass.COUNTER,
        lambda rank: counts[rank],
        binding=Binding.PEER,
        objects=lambda: range(len(counts)),
        flags=PVarFlag.CONTINUOUS,
        description="one per peer",
    )
    ps = PVarSession(registry)
    handles = [ps.handle("btl_wide_count", rank) for rank in range(len(counts))]
    counts[:] = [c + rank % 7 for rank, c in enumerate(counts)]
    assert ps.read_all() == [rank % 7 for rank in range(len(counts))]
    assert ps.read_all() == [h.read() for h in handles]
