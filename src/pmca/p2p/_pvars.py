"""The message layer's performance variables (summed over the process's engines).

Queue lengths are counted when read (a walk over the queues, nothing on the
matching path). The unexpected queue's peak is updated where a message is
queued as unexpected, the slow path that already copies the payload; the
common path (a receive already posted) does nothing more.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any, Protocol

from ..mca._pvars import REGISTRY, PVarClass, PVarFlag, weak_reader

__all__ = ["queued", "register_engine"]


class _Engine(Protocol):
    unexpected_peak: int
    unexpected_total: int

    def queue_lengths(self) -> tuple[int, int]: ...


def queued(queues: Iterable[Any]) -> int:
    return sum(len(queue) for queue in queues)


def register_engine(engine: _Engine) -> None:
    common: dict[str, Any] = {"owner": engine, "level": 4}
    REGISTRY.register(
        "p2p",
        "base",
        "unexpected_queue",
        PVarClass.HIGHWATERMARK,
        weak_reader(engine, lambda e, _o: e.queue_lengths()[1]),
        peak=weak_reader(engine, lambda e, _o: e.unexpected_peak),
        unit="messages",
        description="Messages that arrived before their receive was posted, waiting now "
        "(the most since start or reset)",
        **common,
    )
    REGISTRY.register(
        "p2p",
        "base",
        "unexpected_messages",
        PVarClass.COUNTER,
        weak_reader(engine, lambda e, _o: e.unexpected_total),
        unit="messages",
        flags=PVarFlag.CONTINUOUS,
        description="Messages that arrived before their receive was posted",
        **common,
    )
    REGISTRY.register(
        "p2p",
        "base",
        "posted_receives",
        PVarClass.LEVEL,
        weak_reader(engine, lambda e, _o: e.queue_lengths()[0]),
        unit="requests",
        flags=PVarFlag.READONLY | PVarFlag.CONTINUOUS,
        description="Receives posted and not yet matched",
        **common,
    )
