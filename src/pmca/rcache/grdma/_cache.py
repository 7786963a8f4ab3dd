"""The grdma registration cache (Open MPI's ``mca_rcache_grdma_module_t``)."""

from __future__ import annotations

import ctypes
import mmap
import threading
from collections import OrderedDict
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from attrs import frozen

from ..._public import public
from ..._records import FrozenValue
from ...mca._events import DeferredEvents, Safety
from ...native._subscription import delivering, on_listener_thread
from .._interface import Backend, RcacheError
from .._registration import CacheStats, Registration
from ._pending import ADDRESS_LIMIT, ReleaseLog
from ._pvars import EVICTION
from ._tree import FULL_PATH, IntervalTree

if TYPE_CHECKING:
    from structlog.typing import FilteringBoundLogger

PAGE = mmap.PAGESIZE
_MASK = PAGE - 1

#: Ranges the one-call lookup takes (both address and size below): the rest
#: (negative, too large) goes the full way, which names what is wrong.
_FAST_LIMIT = 1 << 63

#: Hook counters read before a drain: ``(producer position, drops)``.
Counters = tuple[int, int]

#: Backend failures after which evicting cached registrations may help
#: (pinned-memory limits, a full registration table).
_RETRYABLE = (MemoryError, OSError)


@public
def page_range(address: int, size: int) -> tuple[int, int]:
    """``[base, bound)``: the pages ``[address, address + size)`` touches."""
    if address < 0 or size <= 0:
        raise ValueError(f"rcache: bad range address={address:#x} size={size} (size must be > 0)")
    bound = (address + size + _MASK) & ~_MASK
    if bound > ADDRESS_LIMIT:
        raise ValueError(f"rcache: range at {address:#x} of {size} bytes leaves the address space")
    return address & ~_MASK, bound


@public
class GrdmaCache:
    """Registrations indexed by a native interval tree, kept coherent by release events.

    Locks, outermost first: the cache lock (this object's state), then the
    tree's own mutex (inside every tree call).  The release callback takes
    neither (see :mod:`._pending`).  Transport (de)registration runs under
    the cache lock only for ``register``; deregistration of dead entries
    happens after the lock is dropped, at the end of the operation that
    found them dead.
    """

    name = "grdma"

    def __init__(
        self,
        tree: IntervalTree,
        backend: Backend,
        *,
        leave_pinned: bool,
        cache_max_bytes: int,
        pending_max: int,
        log: FilteringBoundLogger,
        on_close: Callable[[GrdmaCache], None] = lambda _cache: None,
    ) -> None:
        self._lock = threading.Lock()
        self._tree = tree
        self._backend = backend
        self.leave_pinned = leave_pinned
        self.cache_max_bytes = cache_max_bytes
        self._log = log
        self._drain: Callable[[], object] | None = None
        self._counters: Callable[[], Counters] | None = None
        self._lookup = tree.lookup
        self._handle = tree.handle
        self._on_close = on_close
        self.releases = ReleaseLog(pending_max)
        tree.watch(0, 0, ctypes.addressof(self.releases.pending), 0)
        self._unsubscribe: Callable[[], None] | None = None
        #: Valid registrations, by their key in the tree: ``id(registration)``,
        #: so that the tree's lookup hands back the object itself.  Indexed
        #: while in this dict (what keeps them alive), removed from the tree
        #: before leaving it.
        self._index: dict[int, Registration] = {}
        #: Registrations whose transport handle is alive (valid or not), by key.
        self._live: dict[int, Registration] = {}
        #: Unused valid registrations kept by leave_pinned, least recently used first.
        self._lru: OrderedDict[int, Registration] = OrderedDict()
        self._garbage: list[Registration] = []
        self._next_key = 1
        self._closed = False
        self._hits = self._misses = self._evictions = 0
        self._invalidations = self._overflows = 0
        self._pinned = 0
        #: The most ever pinned at once (a pvar's peak; updated on the miss path only).
        self.pinned_peak = 0
        #: The counters as the cache closed (set by :meth:`close`).
        self.final_stats: CacheStats | None = None
        #: Eviction events, queued under the lock (see :meth:`deliver_events`).
        self.evictions = DeferredEvents(EVICTION)

    def subscribed(
        self,
        unsubscribe: Callable[[], None],
        *,
        drain: Callable[[], object],
        watch: ReleaseWatch,
    ) -> None:
        """Release events now reach :attr:`releases`; ``drain`` delivers pending ones.

        ``watch`` tells the index where the hooks count what they publish, so
        that a lookup with nothing released since the last drain is one call.
        """
        self._unsubscribe = unsubscribe
        self._drain = drain
        self._counters = watch.counters
        self._tree.watch(
            watch.head_address,
            watch.dropped_address,
            ctypes.addressof(self.releases.pending),
            watch.check_address,
        )

    def deliver_events(self) -> None:
        """Deliver the queued eviction events (never called with the cache lock held).

        A cache with memory hooks has this run by the release dispatcher, on
        its listener thread or in a ``drain()``; one without runs it after
        each operation.
        """
        if len(self.evictions):
            self.evictions.deliver(Safety.THREAD_SAFE if on_listener_thread() else Safety.NONE)

    @property
    def coherent(self) -> bool:
        """Whether release events reach this cache (memory hooks are in place)."""
        return self._drain is not None

    # -- the operations ----------------------------------------------------------

    def register(self, address: int, size: int) -> Registration:
        if 0 <= address | size < _FAST_LIMIT:
            with self._lock:
                found = self._lookup(self._handle, address, size)
                if isinstance(found, Registration):
                    return self._hit_locked(found)
        base, bound = page_range(address, size)
        synced = self._sync()
        with self._lock:
            self._enter_locked(synced)
            key = self._tree.find_covering(base, bound)
            if key is not None:
                registration = self._hit_locked(self._index[key])
            else:
                self._misses += 1
                registration = self._register_locked(base, bound)
            dead = self._take_garbage_locked()
        self._release(dead)
        if self._drain is None:
            self.deliver_events()
        return registration

    def _hit_locked(self, registration: Registration) -> Registration:
        if registration.refcount == 0:
            self._lru.pop(registration.key, None)
        registration.refcount += 1
        self._hits += 1
        return registration

    def deregister(self, registration: Registration) -> None:
        synced = self._sync()
        with self._lock:
            self._enter_locked(synced)
            if self._live.get(registration.key) is not registration:
                raise RcacheError(f"{registration!r} does not belong to this {self.name} cache")
            if registration.refcount <= 0:
                raise RcacheError(f"{registration!r} deregistered more often than registered")
            registration.refcount -= 1
            if registration.refcount == 0:
                if registration.valid and self.leave_pinned:
                    self._lru[registration.key] = registration
                    self._trim_locked()
                else:
                    self._retire_locked(registration)
            dead = self._take_garbage_locked()
        self._release(dead)
        if self._drain is None:
            self.deliver_events()

    def find(self, address: int, size: int) -> Registration | None:
        # The one native call: the index itself says whether anything was
        # released since the last drain, and looks up when nothing was.
        if 0 <= address | size < _FAST_LIMIT:
            found = self._lookup(self._handle, address, size)
            if found is not FULL_PATH:
                return found  # type: ignore[return-value]
        base, bound = page_range(address, size)
        synced = self._sync()
        with self._lock:
            self._enter_locked(synced)
            key = self._tree.find_covering(base, bound)
            found = self._index[key] if key is not None else None
            dead = self._take_garbage_locked()
        self._release(dead)
        return found

    def invalidate(self, address: int, size: int) -> int:
        if size <= 0:
            raise ValueError(f"rcache: invalidate needs size > 0, got {size}")
        synced = self._sync()
        with self._lock:
            self._enter_locked(synced)
            count = self._invalidate_locked(address, min(address + size, ADDRESS_LIMIT))
            dead = self._take_garbage_locked()
        self._release(dead)
        return count

    def stats(self) -> CacheStats:
        synced = self._sync()
        with self._lock:
            if not self._closed:
                self._enter_locked(synced)
            stats = self._stats_locked()
            dead = self._take_garbage_locked()
        self._release(dead)
        return stats

    def lookup_counts(self) -> tuple[int, int]:
        """Lookups the index answered in one call, and those that took the full path
        (releases to apply, every 4096th lookup, an overwrite found)."""
        return self._tree.lookup_counts()

    def _stats_locked(self) -> CacheStats:
        return CacheStats(
            hits=self._hits,
            misses=self._misses,
            evictions=self._evictions,
            invalidations=self._invalidations,
            pinned_bytes=self._pinned,
            registrations=len(self._index),
            cached=len(self._lru),
            garbage=len(self._garbage),
            overflows=self._overflows,
        )

    def close(self) -> None:
        unsubscribe, self._unsubscribe = self._unsubscribe, None
        if unsubscribe is not None:
            unsubscribe()
        with self._lock:
            if self._closed:
                return
            self._closed = True
            #: The counters as the cache closed (before its registrations went).
            self.final_stats = self._stats_locked()
            # The index goes first: what it holds is only referenced by the dicts.
            self._tree.close()
            self._lookup = _closed_lookup
            self._drain = self._counters = None
            held = [r for r in self._live.values() if r.refcount > 0]
            for registration in self._live.values():
                registration.valid = False
            dead = [*self._garbage, *self._live.values()]
            self._live.clear()
            self._pinned = 0
            self._index.clear()
            self._lru.clear()
            self._garbage.clear()
        if held:
            self._log.warning(
                "rcache closed with registrations still held", count=len(held), first=repr(held[0])
            )
        self._release(dead)
        self.deliver_events()  # nothing silent: what the listener had not delivered yet
        self._on_close(self)

    def __repr__(self) -> str:
        state = "closed" if self._closed else f"{len(self._index)} registrations"
        return f"<GrdmaCache {state} leave_pinned={self.leave_pinned}>"

    # -- internals ------------------------------------------------------------------

    def _sync(self) -> Counters | None:
        """Deliver every release published before now (outside the cache lock).

        Returns the hooks' counters as they were before the drain when it was
        complete: once :meth:`_enter_locked` has applied what it delivered,
        every release they count has been applied.
        """
        if self._drain is None or self._counters is None:
            return None
        overwritten = self._tree.take_overwrites()
        if overwritten:  # the index's check found it: react as a drain would have
            from ... import native

            native.overwrites_found(overwritten)
        counters = self._counters()
        try:
            self._drain()
        except Exception as exc:  # an incomplete drain: trust nothing
            self._log.warning("release drain failed; invalidating everything", error=repr(exc))
            self.releases.mark_overflow()
            return None
        # Inside a release callback a drain does not wait for other threads' callbacks.
        return None if delivering() else counters

    def _enter_locked(self, synced: Counters | None) -> None:
        if self._closed:
            raise RcacheError(f"{self.name} cache is closed")
        overflow, ranges = self.releases.take()
        if overflow:
            self._invalidate_all_locked()
        elif self._index:
            for low, high in ranges:
                self._invalidate_locked(low, high)
        self.releases.settle()
        if synced is not None:
            self._tree.synced(*synced)

    def _register_locked(self, base: int, bound: int) -> Registration:
        size = bound - base
        while True:
            try:
                handle = self._backend.register(base, size)
                break
            except _RETRYABLE as exc:
                # Open MPI's grdma: evict an unused registration and try again.
                if not self._lru:
                    raise
                victim = self._evict_one_locked("retry")
                self._discard_locked(victim)
                self._log.debug("registration failed; evicted one", error=repr(exc))
                self._release(self._take_garbage_locked())
        key = self._next_key
        self._next_key += 1
        registration = Registration(base, bound, handle, refcount=1, key=key)
        try:
            self._tree.insert(base, bound, id(registration))
        except BaseException:
            self._release([registration])  # never indexed nor counted
            raise
        self._index[id(registration)] = registration
        self._live[key] = registration
        self._pinned += size
        if self._pinned > self.pinned_peak:
            self.pinned_peak = self._pinned
        if self.leave_pinned:
            self._trim_locked()
        return registration

    def _trim_locked(self) -> None:
        """Evict least recently used unused registrations down to cache_max_bytes."""
        limit = self.cache_max_bytes
        while limit > 0 and self._pinned > limit and self._lru:
            self._discard_locked(self._evict_one_locked("limit"))

    def _discard_locked(self, registration: Registration) -> None:
        """Queue an unused, unindexed registration for transport deregistration."""
        self._garbage.append(registration)
        self._live.pop(registration.key, None)
        self._pinned -= registration.size

    def _evict_one_locked(self, reason: str) -> Registration:
        _key, victim = self._lru.popitem(last=False)
        self._unindex_locked(victim)
        self._evictions += 1
        # Queued only: callbacks never run under the cache lock.
        self.evictions.defer(
            {"cache": self, "address": victim.base, "length": victim.size, "reason": reason}
        )
        return victim

    def _unindex_locked(self, registration: Registration) -> None:
        if registration.valid:
            registration.valid = False
            self._tree.remove(registration.base, id(registration))  # first: see _index
            del self._index[id(registration)]

    def _retire_locked(self, registration: Registration) -> None:
        self._unindex_locked(registration)
        self._discard_locked(registration)

    def _invalidate_locked(self, low: int, high: int) -> int:
        keys = self._tree.overlapping(low, high)
        for key in keys:
            registration = self._index[key]
            self._unindex_locked(registration)
            if registration.refcount == 0:
                self._lru.pop(registration.key, None)
                self._discard_locked(registration)
        self._invalidations += len(keys)
        return len(keys)

    def _invalidate_all_locked(self) -> None:
        self._overflows += 1
        self._invalidations += len(self._index)
        self._tree.clear()
        index, self._index = self._index, {}
        for registration in index.values():
            registration.valid = False
            if registration.refcount == 0:
                self._discard_locked(registration)
        self._lru.clear()

    def _take_garbage_locked(self) -> list[Registration]:
        dead, self._garbage = self._garbage, []
        return dead

    def _release(self, dead: list[Registration]) -> None:
        """Deregister dead entries with the transport (never in a callback, never locked)."""
        for registration in dead:
            try:
                self._backend.deregister(registration.handle)
            except Exception as exc:
                self._log.error(
                    "transport deregistration failed",
                    registration=repr(registration),
                    error=repr(exc),
                )


def _closed_lookup(handle: int, address: int, size: int) -> object:
    return FULL_PATH


@frozen(eq=False, repr=False)
class ReleaseWatch(FrozenValue):
    """Where the memory hooks count releases, for the index's one-call lookup.

    :param head_address: the producer position of the release ring (a uint64).
    :param dropped_address: its count of lost events (a uint64).
    :param check_address: the hooks' overwrite check, ``uint32_t (*)(void)``.
    :param counters: reads both counters now.
    """

    head_address: int
    dropped_address: int
    check_address: int
    counters: Callable[[], Counters]


def options_error(options: dict[str, Any], known: tuple[str, ...]) -> str | None:
    """Why ``options`` cannot be used, or None."""
    unknown = sorted(set(options) - set(known))
    if unknown:
        return f"unknown grdma option(s) {', '.join(unknown)}; known: {', '.join(known)}"
    return None
