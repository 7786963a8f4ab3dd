"""stats(): what the ring and the dispatcher have done in this process."""

from __future__ import annotations

from typing import Any

import attrs

from .._public import public
from ._backend import backend
from ._dispatch import dispatcher


@public
@attrs.frozen(slots=True)
class DeliveryStats:
    """Cumulative counters of release-event delivery in this process.

    ``published`` events entered the ring; ``dropped`` never did or were
    given up on (a full ring, a producer stalled past a drain's bound, a fork
    discarding queued events); each drop reaches subscribers as an overflow
    notice (``overflows`` counts notices delivered, one per subscriber).
    ``delivered`` counts (event, subscriber) deliveries; ``lagged`` the
    (event, subscriber) pairs replaced by an overflow notice because the
    subscriber fell more than a second behind the ring.  ``wakeups`` counts
    listener wake-ups, ``threshold_wakeups`` the ones producers caused by
    filling a quarter of the ring (the others are the timer).
    """

    capacity: int
    published: int
    pending: int
    delivered: int
    dropped: int
    overflows: int
    lagged: int
    incomplete_drains: int
    wakeups: int
    threshold_wakeups: int
    callback_errors: int
    drains: int
    subscribers: int
    listener_errors: int
    check_errors: int

    def as_dict(self) -> dict[str, Any]:
        return attrs.asdict(self)

    def __str__(self) -> str:
        return ", ".join(
            f"{name.replace('_', ' ')} {value}" for name, value in self.as_dict().items()
        )


@public
def stats() -> DeliveryStats:
    """Counters of the native ring and the process-wide dispatcher."""
    ring = backend().ring_state()
    dispatch = dispatcher()
    counters = dispatch.counters
    with counters.lock:
        delivered, overflows, errors, lagged = (
            counters.delivered,
            counters.overflows,
            counters.callback_errors,
            counters.lagged,
        )
    return DeliveryStats(
        capacity=ring.capacity,
        published=ring.published,
        pending=ring.pending,
        delivered=delivered,
        dropped=ring.dropped,
        overflows=overflows,
        lagged=lagged,
        incomplete_drains=ring.incomplete_drains,
        wakeups=dispatch.listener_wakeups,
        threshold_wakeups=ring.producer_wakeups,
        callback_errors=errors,
        drains=dispatch.drains,
        subscribers=dispatch.subscriber_count,
        listener_errors=dispatch.listener_errors,
        check_errors=dispatch.check_errors,
    )
