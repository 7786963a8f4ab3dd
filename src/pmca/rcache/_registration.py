"""What a registration cache hands out: registrations and counters.

Imported with the first cache a session creates (and by whoever names these
types): a session that never registers memory does not build them.
"""

from __future__ import annotations

from typing import Any

from attrs import define, field, frozen

from .._public import public
from .._records import FrozenValue

__all__ = ["CacheStats", "Registration"]


@public
@define(eq=False, repr=False)
class Registration:
    """One registered range, shared by every request it covers.

    :param base: first byte, page-aligned.
    :param bound: first byte *after* the range, page-aligned (Open MPI's
        ``bound`` is the last byte, ``bound - 1`` here).
    :param handle: what :meth:`Backend.register` returned.
    :param refcount: how many :meth:`RegistrationCache.register` calls hold
        it; changed only by the cache.
    :param valid: false once a release event or :meth:`~RegistrationCache.invalidate`
        removed it from the index: no new request finds it, and its transport
        handle is released when the last holder lets go.
    """

    base: int
    bound: int
    handle: Any
    refcount: int = 0
    valid: bool = True
    #: The cache's key for it (unique within one cache).
    key: int = field(default=0, kw_only=True)

    @property
    def size(self) -> int:
        return self.bound - self.base

    def covers(self, address: int, size: int) -> bool:
        """Whether ``[address, address + size)`` lies inside this registration."""
        return self.base <= address and address + size <= self.bound

    def __repr__(self) -> str:
        state = "valid" if self.valid else "invalid"
        return (
            f"<Registration [{self.base:#x}, {self.bound:#x}) handle={self.handle!r} "
            f"refcount={self.refcount} {state}>"
        )


@public
@frozen(eq=False, repr=False)
class CacheStats(FrozenValue):
    """Counters of one cache (``rc.stats()``).

    :param hits: requests served by an existing registration.
    :param misses: requests that needed a new transport registration.
    :param evictions: unused registrations dropped to stay under
        ``rcache_grdma_cache_max_bytes`` (or to retry a failed registration).
    :param invalidations: registrations removed because their memory was
        released (events, overflow, or explicit :meth:`~RegistrationCache.invalidate`).
    :param pinned_bytes: bytes registered with the transport now (in use,
        cached, or invalidated but still held).
    :param registrations: registrations in the index now.
    :param cached: unused registrations kept by ``mpi_leave_pinned`` (the LRU).
    :param garbage: registrations waiting for their transport deregistration.
    :param overflows: times the cache invalidated everything because release
        events were lost.
    """

    hits: int = 0
    misses: int = 0
    evictions: int = 0
    invalidations: int = 0
    pinned_bytes: int = 0
    registrations: int = 0
    cached: int = 0
    garbage: int = 0
    overflows: int = 0
