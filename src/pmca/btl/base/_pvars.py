"""Per-peer traffic counters of every btl module, and their performance variables.

Each module keeps, per peer rank, one list of integers (:data:`SLOTS` of
them, indexed by the constants below): active messages and their bytes
sent (when ``sendi`` accepts one or ``send`` takes one) and received (when
one is delivered, or placed for a tag's placer), the put/get operations
that move a rendezvous's data and their bytes, the peer's failures, and for
tcp the large messages placed where their receiver named or staged in a
buffer of their own.

The built-in modules count where they already handle each message, on the
peer's list they hold next to what they already looked up (tcp: the
connection; ofi: the endpoint; self: its one peer), so counting is an
attribute load and two integer additions, no call and no dict lookup; sm
counts in C, in a page of counters the module owns, lanes included (see
:mod:`pmca.btl.sm`). A module class that does not say it counts its own
sends (:attr:`~pmca.btl.base.ModuleBase.counts_own_sends`) gets its
``send``/``sendi`` wrapped by ``ModuleBase``: one more call and a dict
lookup per message.

No counter takes a lock or an atomic of its own, and none needs one: every
count is one in-place addition to a list item of a value computed before
it (``slot[BYTES_SENT] += size``, never ``+= len(data)`` or ``+= sum(...)``).
The interpreter switches threads only at a call, a function's start or a
backward jump (CPython 3.10 to 3.13, with its GIL), so no other thread runs
between such an addition's read and its write, and counts stay exact when
several threads send on one module without a lock of their own. (With a
call on the right, a thread switch there lost a third of the bytes two
threads counted.) sm counts in C under its own lock.

Reading a pvar sums a module's :meth:`~pmca.btl.base.ModuleBase.counter`
over the live modules of the component (each bound per peer: ``obj`` is the
rank) and adds what its finalized modules counted (kept when each finished
finalizing, so a counter never goes down when a module goes away); a
sweep (:meth:`~pmca.mca.PVarSession.read_all`) sums a peer's whole list
once for all of the component's counters. RDMA (put/get) bytes
are not active messages and are not counted in
``bytes_sent``/``bytes_received``.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Sequence
from typing import Any, Protocol

from ...mca._pvars import REGISTRY, Binding, Producers, PVarClass, PVarFlag, PVarGroup

__all__ = [
    "BYTES_RECEIVED",
    "BYTES_SENT",
    "FAILURES",
    "INDEX",
    "LANE_COUNTERS",
    "LANE_RECEIVED",
    "LANE_SENT",
    "MESSAGES_RECEIVED",
    "MESSAGES_SENT",
    "NATIVE_RECEIVED",
    "NATIVE_SENT",
    "RDMA_BYTES",
    "RDMA_OPERATIONS",
    "SLOTS",
    "STREAMS_PLACED",
    "STREAMS_STAGED",
    "Counter",
    "count_rdma",
    "count_received",
    "counting_send",
    "counting_sendi",
    "declare",
    "declare_counters",
    "keeping_counts",
    "noting_peers",
    "peer_slot",
    "register_module",
    "retire_module",
]

MESSAGES_SENT, BYTES_SENT, MESSAGES_RECEIVED, BYTES_RECEIVED = 0, 1, 2, 3
RDMA_OPERATIONS, RDMA_BYTES, FAILURES, STREAMS_PLACED, STREAMS_STAGED = 4, 5, 6, 7, 8
LANE_SENT, LANE_RECEIVED = 9, 10
NATIVE_RECEIVED, NATIVE_SENT = 11, 12
#: Length of a peer's list of counters.
SLOTS = 13


class Counted(Protocol):
    """What the counters need of a module (:class:`~pmca.btl.base.ModuleBase`)."""

    name: str
    traffic: dict[int, list[int]]
    reachable: set[int]
    #: Its ``counter`` reads ``traffic`` only (it does not count anything elsewhere).
    counts_in_traffic: bool

    def peer_ranks(self) -> list[int]: ...

    def counter(self, name: str, rank: int) -> int: ...


#: One pvar of a btl: name, unit, description (bound per peer).
Counter = tuple[str, str, str]

#: Declared for every btl component.
COMMON: tuple[Counter, ...] = (
    ("messages_sent", "messages", "Active messages sent to the peer"),
    ("bytes_sent", "bytes", "Bytes of active messages sent to the peer"),
    ("messages_received", "messages", "Active messages received from the peer"),
    ("bytes_received", "bytes", "Bytes of active messages received from the peer"),
    (
        "rdma_operations",
        "operations",
        "Puts and gets issued to the peer (the data of rendezvous messages; eager "
        "ones are the active messages)",
    ),
    ("rdma_bytes", "bytes", "Bytes of the puts and gets issued to the peer"),
    ("peer_failures", "failures", "Times the peer was reported lost"),
)

#: Of the active messages counted, those a lane moved (the message layer's
#: one-call send or receive, a module's ``open_lane``) rather
#: than the engine's general path; declared by the btls that have lanes.
LANE_COUNTERS: tuple[Counter, ...] = (
    ("lane_messages_sent", "messages", "Of the messages sent to the peer, those sent by a lane"),
    (
        "lane_messages_received",
        "messages",
        "Of the messages received from the peer, those a lane landed",
    ),
)

#: Counter name -> index in a peer's list (those ModuleBase keeps in Python).
INDEX = {
    "messages_sent": MESSAGES_SENT,
    "bytes_sent": BYTES_SENT,
    "messages_received": MESSAGES_RECEIVED,
    "bytes_received": BYTES_RECEIVED,
    "rdma_operations": RDMA_OPERATIONS,
    "rdma_bytes": RDMA_BYTES,
    "peer_failures": FAILURES,
    "streams_placed": STREAMS_PLACED,
    "streams_staged": STREAMS_STAGED,
    "lane_messages_sent": LANE_SENT,
    "lane_messages_received": LANE_RECEIVED,
    "native_bytes_received": NATIVE_RECEIVED,
    "native_bytes_sent": NATIVE_SENT,
}


class Retired:
    """What a component's finalized modules counted, per peer (replaced whole, never
    changed in place: a reader may hold the one it took)."""

    __slots__ = ("named", "slots")

    def __init__(self, slots: dict[int, list[int]], named: dict[tuple[str, int], int]) -> None:
        #: Peer rank -> the sums of its lists (:data:`SLOTS` integers).
        self.slots = slots
        #: (counter, peer rank) -> sum, for the counters not in :data:`INDEX`.
        self.named = named

    def ranks(self) -> set[int]:
        return set(self.slots) | {rank for _, rank in self.named}


#: Modules by component name (the pvars read the live ones and what the
#: finalized ones counted).
_modules: dict[str, Producers[Counted, Retired]] = {}
#: Counter names already declared, by component.
_declared: dict[str, set[str]] = {}
#: Each component's counters read together (the fields of its INDEX names).
_groups: dict[str, PVarGroup] = {}


def _nbytes(part: Any) -> int:
    return len(part) if type(part) is bytes or type(part) is bytearray else memoryview(part).nbytes


def peer_slot(counters: dict[int, list[int]], rank: int) -> list[int]:
    """Peer ``rank``'s counters in ``counters``, made at the first use."""
    slot = counters.get(rank)
    if slot is None:
        slot = counters[rank] = [0] * SLOTS
    return slot


def count_sent(counters: dict[int, list[int]], rank: int, parts: Sequence[Any]) -> None:
    size = sum(_nbytes(p) for p in parts)  # first: no call inside the additions below
    slot = peer_slot(counters, rank)
    slot[MESSAGES_SENT] += 1
    slot[BYTES_SENT] += size


def count_received(counters: dict[int, list[int]], rank: int, nbytes: int) -> None:
    slot = peer_slot(counters, rank)
    slot[MESSAGES_RECEIVED] += 1
    slot[BYTES_RECEIVED] += nbytes


def count_rdma(counters: dict[int, list[int]], rank: int, nbytes: int) -> None:
    slot = peer_slot(counters, rank)
    slot[RDMA_OPERATIONS] += 1
    slot[RDMA_BYTES] += nbytes


def counting_sendi(cls: type, sendi: Callable[..., bool]) -> Callable[..., bool]:
    """``cls.sendi`` that counts the messages it accepted (modules that do not count
    their own). Only the module's outermost ``sendi`` counts: one that a subclass's
    calls (``super().sendi``) does not count the message again."""

    @functools.wraps(sendi)
    def sendi_counted(self: Counted, endpoint: Any, tag: int, parts: Sequence[Any]) -> bool:
        if sendi(self, endpoint, tag, parts):
            if type(self).sendi_counted_by is cls:  # type: ignore[attr-defined]
                count_sent(self.traffic, endpoint.rank, parts)
            return True
        return False

    return sendi_counted


def counting_send(cls: type, send: Callable[..., None]) -> Callable[..., None]:
    """``cls.send`` that counts the messages it took (modules that do not count their
    own); only the module's outermost ``send`` counts (see :func:`counting_sendi`)."""

    @functools.wraps(send)
    def send_counted(
        self: Counted, endpoint: Any, tag: int, parts: Sequence[Any], *args: Any, **kw: Any
    ) -> None:
        send(self, endpoint, tag, parts, *args, **kw)
        if type(self).send_counted_by is cls:  # type: ignore[attr-defined]
            count_sent(self.traffic, endpoint.rank, parts)

    return send_counted


def keeping_counts(cls: type, finalize: Callable[..., None]) -> Callable[..., None]:
    """``cls.finalize`` that keeps the module's counts once it has finished (also
    when it raised); a subclass's ``finalize`` calling this one keeps them at its
    own end instead."""

    @functools.wraps(finalize)
    def finalize_keeping(self: Counted) -> None:
        try:
            finalize(self)
        finally:
            outermost = next(k for k in type(self).__mro__ if "finalize" in k.__dict__)
            if outermost is cls:
                retire_module(self)

    return finalize_keeping


def noting_peers(add_procs: Callable[..., Any]) -> Callable[..., Any]:
    """``add_procs`` that remembers the ranks it returned an endpoint for."""

    @functools.wraps(add_procs)
    def add_procs_noted(self: Counted, procs: Sequence[Any]) -> Any:
        endpoints = add_procs(self, procs)
        self.reachable.update(
            proc.rank
            for proc, endpoint in zip(procs, endpoints, strict=False)
            if endpoint is not None
        )
        return endpoints

    return add_procs_noted


def _reader(modules: Producers[Counted, Retired], name: str) -> Callable[[Any], float]:
    index = INDEX.get(name)

    def read(rank: Any) -> float:
        # a tool may call this every millisecond for every peer: no copy, no
        # generator, and the peer's slot read here when that is all counter() does
        refs, retired = modules.state
        if index is None:
            total = retired.named.get((name, rank), 0)
        else:
            kept = retired.slots.get(rank)
            total = 0 if kept is None else kept[index]
        for ref in refs:
            module = ref()
            if module is None:
                continue
            if index is not None and module.counts_in_traffic:
                slot = module.traffic.get(rank)
                if slot is not None:
                    total += slot[index]
            else:
                total += module.counter(name, rank)
        return total

    return read


def _add_module(
    total: list[int] | None, module: Counted, rank: int, declared: set[str]
) -> list[int] | None:
    """``total`` (a list of its own, or None) with ``module``'s counts for ``rank`` added."""
    if module.counts_in_traffic:
        slot = module.traffic.get(rank)
        if slot is None:
            return total
        if total is None:
            return slot[:]  # a copy: the sweep's values must not move with the module's
        return [a + b for a, b in zip(total, slot, strict=True)]
    if total is None:
        total = [0] * SLOTS
    for name in declared:
        index = INDEX.get(name)
        if index is not None:
            total[index] += module.counter(name, rank)
    return total


def _group(modules: Producers[Counted, Retired], declared: set[str]) -> PVarGroup:
    """A peer's counters of every module of a component, summed, in one read."""

    def read(rank: Any) -> list[int]:
        refs, retired = modules.state
        kept = retired.slots.get(rank)
        total = None if kept is None else kept[:]
        for ref in refs:
            module = ref()
            if module is not None:
                total = _add_module(total, module, rank, declared)
        return [0] * SLOTS if total is None else total

    return PVarGroup(read)


def _keeper(declared: set[str]) -> Callable[[Retired, Counted], Retired]:
    """How a component's finalized module's counts join its kept ones."""

    def keep(retired: Retired, module: Counted) -> Retired:
        slots = dict(retired.slots)
        named = dict(retired.named)
        for rank in module.peer_ranks():
            total = _add_module(
                None if rank not in slots else slots[rank][:], module, rank, declared
            )
            if total is not None:
                slots[rank] = total
            if not module.counts_in_traffic:
                for name in declared - INDEX.keys():
                    named[name, rank] = named.get((name, rank), 0) + module.counter(name, rank)
        return Retired(slots, named)

    return keep


def _peers(modules: Producers[Counted, Retired]) -> Callable[[], list[int]]:
    def peers() -> list[int]:
        ranks = modules.retired.ranks()
        for module in modules.live():
            ranks.update(module.peer_ranks())
        return sorted(ranks)

    return peers


def register_module(module: Counted) -> None:
    """Track ``module`` (its component's pvars sum over the live ones)."""
    declare(module.name).add(module)


def retire_module(module: Counted) -> None:
    """Keep what ``module`` counted (it is finalized: it counts no more)."""
    modules = _modules.get(module.name)
    if modules is not None:
        modules.retire(module)


def declare(component: str) -> Producers[Counted, Retired]:
    """Declare ``btl_<component>_*`` (at the component's parameter registration)."""
    declare_counters(component, COMMON)
    return _modules[component]


def declare_counters(component: str, counters: Sequence[Counter]) -> None:
    """Declare per-peer counter pvars ``btl_<component>_<name>`` a module's
    :meth:`~pmca.btl.base.ModuleBase.counter` answers for."""
    done = _declared.setdefault(component, set())
    modules = _modules.get(component)
    if modules is None:
        modules = _modules[component] = Producers(Retired({}, {}), _keeper(done))
    group = _groups.get(component)
    if group is None:
        group = _groups[component] = _group(modules, done)
    for name, unit, description in counters:
        if name in done:
            continue
        done.add(name)
        index = INDEX.get(name)
        REGISTRY.register(
            "btl",
            component,
            name,
            PVarClass.COUNTER,
            _reader(modules, name),
            unit=unit,
            level=4,
            binding=Binding.PEER,
            objects=_peers(modules),
            flags=PVarFlag.CONTINUOUS,
            group=None if index is None else group.field(index),
            description=f"{description} (btl {component}; obj is the peer's rank)",
        )
