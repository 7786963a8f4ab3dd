"""What the rcache framework exchanges with transports and with its users.

A transport (a BTL) supplies a :class:`Backend` that registers page-aligned
ranges with the hardware or kernel (pins them) and deregisters them; it asks
a cache created by :func:`pmca.rcache.create` for registrations and gets
:class:`Registration` objects back.  This module is the stable contract:
the cache internals live in the components.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

from .._public import public
from ..mca._errors import PmcaError

if TYPE_CHECKING:
    from ._registration import CacheStats, Registration


@public
class RcacheError(PmcaError):
    """A registration cache could not be created or used as asked."""


@public
@runtime_checkable
class Backend(Protocol):
    """How a transport registers memory (Open MPI's ``register_mem``/``deregister_mem``).

    The cache only ever passes page-aligned ``base`` and a size that is a
    whole number of pages.  ``register`` returns the transport's handle for
    the range (an MR, a key, a registered-buffer index...); ``deregister``
    receives that handle back exactly once.  Neither is ever called from
    inside a release callback, and never with the cache's index lock held,
    so both may allocate, free, block and raise.  An exception from
    ``register`` reaches the caller of :meth:`RegistrationCache.register`.
    """

    def register(self, base: int, size: int) -> Any:
        """Register (pin) ``[base, base + size)``; return the transport handle."""
        ...

    def deregister(self, handle: Any) -> None:
        """Release a handle ``register`` returned."""
        ...


@public
@runtime_checkable
class RegistrationCache(Protocol):
    """The cache operations a transport calls (Open MPI's ``mca_rcache_base_module_t``).

    Every operation first applies the release events published before it
    began (drained from the memory hooks): a registration whose memory was
    released is never handed out.  All operations are thread-safe.
    """

    @property
    def name(self) -> str:
        """The component that made it (``grdma``)."""
        ...

    def register(self, address: int, size: int) -> Registration:
        """A registration covering ``[address, address + size)``, with one more reference.

        Pages are rounded outwards; a valid registration that already covers
        the range is reused (a hit), otherwise the backend registers a new one.
        """
        ...

    def deregister(self, registration: Registration) -> None:
        """Drop one reference; at zero, keep it cached (leave_pinned) or release it."""
        ...

    def find(self, address: int, size: int) -> Registration | None:
        """The valid registration covering the range, if any, without taking a reference."""
        ...

    def invalidate(self, address: int, size: int) -> int:
        """Invalidate every registration overlapping the range; returns how many."""
        ...

    def stats(self) -> CacheStats:
        """The cache's counters now."""
        ...

    def close(self) -> None:
        """Release every registration with the transport; the cache is unusable after."""
        ...


@public
@runtime_checkable
class RcacheModule(Protocol):
    """What an rcache component's ``query`` returns: a factory of caches."""

    def create(self, backend: Backend, **options: Any) -> RegistrationCache:
        """A new cache over ``backend``; ``options`` override the component's parameters."""
        ...

    def caches(self) -> list[RegistrationCache]:
        """The caches it created that are still open."""
        ...

    def close_all(self) -> None:
        """Close every cache it created (at framework close)."""
        ...
