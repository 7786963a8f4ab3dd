"""The message layer's performance variables (summed over the process's engines).

Counters (unexpected messages, matching time) include what the engines of
finalized sessions counted; the queue lengths are those of the engines
still open.

Queue lengths are counted when read (a walk over the queues, nothing on the
matching path). The unexpected queue's peak is updated where a message is
queued as unexpected, the slow path that already copies the payload; the
common path (a receive already posted) does nothing more.

Matching time is measured only while a handle on ``p2p_base_matching_time``
is started: the matching path then reads the clock twice per search of a
queue (an arriving message against the posted receives, a posted receive
against the unexpected messages); otherwise it tests one flag.
"""

from __future__ import annotations

import operator
from collections.abc import Callable, Iterable
from typing import Any, Protocol

from ..mca._pvars import REGISTRY, Producers, PVarClass, PVarFlag, PVarGroup

__all__ = ["MATCHING_TIMER", "queued", "register_engine", "retire_engine"]


class _Engine(Protocol):
    unexpected_peak: int
    unexpected_total: int
    matching_ns: int

    def queue_lengths(self) -> tuple[int, int]: ...


#: What closed engines counted: unexpected messages, matching nanoseconds.
_Kept = tuple[int, int]


def _keep(kept: _Kept, engine: _Engine) -> _Kept:
    return kept[0] + engine.unexpected_total, kept[1] + engine.matching_ns


_engines: Producers[_Engine, _Kept] = Producers((0, 0), _keep)


def queued(queues: Iterable[Any]) -> int:
    return sum(map(len, queues))


def register_engine(engine: _Engine) -> None:
    _engines.add(engine)


def retire_engine(engine: _Engine) -> None:
    """Keep ``engine``'s counts (it is closed: it matches nothing more); its
    queues leave the levels."""
    _engines.retire(engine)


def _waiting(which: int) -> Callable[[object], float]:
    def waiting(_obj: object) -> float:
        count = 0
        for ref in _engines.refs:  # no copy, no generator: tools read this often
            engine = ref()
            if engine is not None:
                count += engine.queue_lengths()[which]
        return count

    return waiting


def _counted(which: int, attribute: str) -> Callable[[object], int]:
    """Count ``which`` of the closed engines' (_Kept) plus ``attribute`` of the open ones."""
    own = operator.attrgetter(attribute)

    def counted(_obj: object) -> int:
        refs, kept = _engines.state
        count = kept[which]
        for ref in refs:
            engine = ref()
            if engine is not None:
                count += own(engine)
        return count

    return counted


_unexpected_messages = _counted(0, "unexpected_total")
_matching_ns = _counted(1, "matching_ns")


def _everything(_obj: object) -> tuple[int, int, int, float]:
    """Posted and unexpected queue lengths, unexpected messages and matching seconds."""
    refs, (total, nanoseconds) = _engines.state
    posted = unexpected = 0
    for ref in refs:
        engine = ref()
        if engine is not None:
            waiting, arrived = engine.queue_lengths()
            posted += waiting
            unexpected += arrived
            total += engine.unexpected_total
            nanoseconds += engine.matching_ns
    return posted, unexpected, total, nanoseconds / 1e9


#: Every p2p pvar's value (the watermark's level: the unexpected queue's),
#: walked once in a sweep.
_ENGINES = PVarGroup(_everything)


def _matching_seconds(obj: object) -> float:
    return _matching_ns(obj) / 1e9


class _Timer:
    """Whether the engines time their matching: while any handle on the pvar is started."""

    __slots__ = ("_started", "on")

    def __init__(self) -> None:
        self._started = 0
        self.on = False

    def notify(self, started: bool) -> None:
        self._started = max(0, self._started + (1 if started else -1))
        self.on = self._started > 0


MATCHING_TIMER = _Timer()


def _peak(_obj: object) -> float:
    peak = 0
    for ref in _engines.refs:
        engine = ref()
        if engine is not None and engine.unexpected_peak > peak:
            peak = engine.unexpected_peak
    return peak


REGISTRY.register(
    "p2p",
    "base",
    "unexpected_queue",
    PVarClass.HIGHWATERMARK,
    _waiting(1),
    peak=_peak,
    group=_ENGINES.field(1),
    unit="messages",
    level=4,
    description="Messages that arrived before their receive was posted, waiting now "
    "(the most since start or reset)",
)
REGISTRY.register(
    "p2p",
    "base",
    "unexpected_messages",
    PVarClass.COUNTER,
    _unexpected_messages,
    group=_ENGINES.field(2),
    unit="messages",
    level=4,
    flags=PVarFlag.CONTINUOUS,
    description="Messages that arrived before their receive was posted",
)
REGISTRY.register(
    "p2p",
    "base",
    "posted_receives",
    PVarClass.LEVEL,
    _waiting(0),
    group=_ENGINES.field(0),
    unit="requests",
    level=4,
    flags=PVarFlag.READONLY | PVarFlag.CONTINUOUS,
    description="Receives posted and not yet matched",
)
REGISTRY.register(
    "p2p",
    "base",
    "matching_time",
    PVarClass.TIMER,
    _matching_seconds,
    group=_ENGINES.field(3),
    unit="seconds",
    type="float",
    level=5,
    notify=MATCHING_TIMER.notify,
    description="Seconds spent matching messages and receives (searching the posted and "
    "unexpected queues), measured only while a handle on it is started",
)
