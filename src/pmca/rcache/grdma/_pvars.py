"""grdma's performance variables, bound per cache (``obj`` is the cache object).

Each read is one ``cache.stats()``: the cache's own lock, taken as any
operation takes it, and the counters the hit and miss paths already keep.
A sweep (:meth:`~pmca.mca.PVarSession.read_all`) takes one ``stats()`` and
one ``lookup_counts()`` per cache for all of them.
The lookup counts are the index's own, counted where its lookup branches
to the full path (under the lock it holds anyway); the fast path adds
nothing, its count is the total less the full ones.
The pinned-bytes peak is updated on the miss path (after a transport
registration), never on a hit.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from ...mca._events import EVENTS
from ...mca._pvars import REGISTRY, Binding, PVarClass, PVarFlag, PVarGroup

__all__ = ["EVICTION", "register_pvars"]

#: The eviction event: raised under the cache lock, so queued there and
#: delivered later (see GrdmaCache.deliver_events).
EVICTION = EVENTS.declare(
    "rcache",
    "grdma",
    "eviction",
    ("cache", "address", "length", "reason"),
    level=5,
    description="An unused cached registration was dropped: cache (the cache object, as "
    "pmca.rcache.caches() lists it), address and length of the registered pages, reason "
    "('limit': over rcache_grdma_cache_max_bytes; 'retry': a transport registration "
    "failed and was retried after it). Delivered from the release drain or listener "
    "thread (or, for a cache without memory hooks, after the operation that evicted), "
    "never under the cache lock",
).name


def _caches() -> list[Any]:
    from .. import caches

    return [cache for cache in caches() if cache.name == "grdma"]


def _stat(field: str) -> Callable[[Any], float]:
    return lambda cache: int(getattr(cache.stats(), field))


def _lookups(index: int) -> Callable[[Any], float]:
    return lambda cache: cache.lookup_counts()[index]


#: (name, reader, unit, level, description) of each counter.
_COUNTERS = (
    ("hits", _stat("hits"), "registrations", 4, "Requests served by an existing registration"),
    (
        "misses",
        _stat("misses"),
        "registrations",
        4,
        "Requests that needed a new transport registration",
    ),
    (
        "evictions",
        _stat("evictions"),
        "registrations",
        4,
        "Unused registrations dropped to stay under the limit",
    ),
    (
        "invalidations",
        _stat("invalidations"),
        "registrations",
        4,
        "Registrations removed because their memory was released",
    ),
    (
        "overflows",
        _stat("overflows"),
        "events",
        4,
        "Times the cache invalidated everything after lost release events",
    ),
    # The index's one-call lookup (``find``, and ``register``'s first try).
    ("fast_lookups", _lookups(0), "lookups", 5, "Lookups the index answered in one native call"),
    (
        "full_lookups",
        _lookups(1),
        "lookups",
        5,
        "Lookups sent to the full path: releases to apply first, every 4096th lookup, "
        "an overwritten hook found",
    ),
)


#: The members of a cache's group, in the order its read gives them.
_MEMBERS = (*(name for name, *_ in _COUNTERS), "registrations", "pinned_bytes")


def _everything(cache: Any) -> list[int]:
    """Every member's value for ``cache``: one ``stats()`` for a sweep's reads of it."""
    stats = cache.stats()
    fast, full = cache.lookup_counts()
    lookups = {"fast_lookups": fast, "full_lookups": full}
    return [
        lookups[member] if member in lookups else int(getattr(stats, member)) for member in _MEMBERS
    ]


_CACHE = PVarGroup(_everything)


def register_pvars() -> None:
    for name, read, unit, level, description in _COUNTERS:
        REGISTRY.register(
            "rcache",
            "grdma",
            name,
            PVarClass.COUNTER,
            read,
            group=_CACHE.field(_MEMBERS.index(name)),
            unit=unit,
            level=level,
            binding=Binding.CACHE,
            objects=_caches,
            flags=PVarFlag.CONTINUOUS,
            description=f"{description} (obj: a cache from pmca.rcache.caches())",
        )
    REGISTRY.register(
        "rcache",
        "grdma",
        "registrations",
        PVarClass.LEVEL,
        _stat("registrations"),
        group=_CACHE.field(_MEMBERS.index("registrations")),
        unit="registrations",
        level=4,
        binding=Binding.CACHE,
        objects=_caches,
        flags=PVarFlag.READONLY | PVarFlag.CONTINUOUS,
        description="Registrations in the cache's index now",
    )
    REGISTRY.register(
        "rcache",
        "grdma",
        "pinned_bytes",
        PVarClass.HIGHWATERMARK,
        _stat("pinned_bytes"),
        group=_CACHE.field(_MEMBERS.index("pinned_bytes")),
        peak=lambda cache: int(cache.pinned_peak),
        unit="bytes",
        level=4,
        binding=Binding.CACHE,
        objects=_caches,
        description="Bytes registered with the transport (the most since start or reset)",
    )
