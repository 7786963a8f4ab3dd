"""grdma's performance variables, bound per cache (``obj`` is the cache object).

Each read is one ``cache.stats()``: the cache's own lock, taken as any
operation takes it, and the counters the hit and miss paths already keep.
The pinned-bytes peak is updated on the miss path (after a transport
registration), never on a hit.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from ...mca._pvars import REGISTRY, Binding, PVarClass, PVarFlag

__all__ = ["register_pvars"]

_COUNTERS = (
    ("hits", "registrations", "Requests served by an existing registration"),
    ("misses", "registrations", "Requests that needed a new transport registration"),
    ("evictions", "registrations", "Unused registrations dropped to stay under the limit"),
    ("invalidations", "registrations", "Registrations removed because their memory was released"),
    ("overflows", "events", "Times the cache invalidated everything after lost release events"),
)


def _caches() -> list[Any]:
    from .. import caches

    return [cache for cache in caches() if cache.name == "grdma"]


def _stat(field: str) -> Callable[[Any], float]:
    return lambda cache: int(getattr(cache.stats(), field))


def register_pvars() -> None:
    for name, unit, description in _COUNTERS:
        REGISTRY.register(
            "rcache",
            "grdma",
            name,
            PVarClass.COUNTER,
            _stat(name),
            unit=unit,
            level=4,
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
        peak=lambda cache: int(cache.pinned_peak),
        unit="bytes",
        level=4,
        binding=Binding.CACHE,
        objects=_caches,
        description="Bytes registered with the transport (the most since start or reset)",
    )
