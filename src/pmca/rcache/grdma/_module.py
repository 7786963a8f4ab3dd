"""The grdma module: a factory of caches, and what it needs from the session."""

from __future__ import annotations

import ctypes
import sys
import threading
from typing import TYPE_CHECKING, Any

from ..._public import public
from .._interface import Backend, RcacheError
from ._tree import IntervalTree

if TYPE_CHECKING:
    from structlog.typing import FilteringBoundLogger

    from ._cache import GrdmaCache

#: Options ``pmca.rcache.create("grdma", backend, **options)`` accepts.
OPTIONS = ("leave_pinned", "cache_max_bytes", "pending_max")


@public
class GrdmaModule:
    """Creates :class:`GrdmaCache` objects over one loaded index library."""

    def __init__(
        self,
        cdll: ctypes.CDLL,
        *,
        leave_pinned: int,
        cache_max_bytes: int,
        pending_max: int,
        log: FilteringBoundLogger,
        print_stats: bool = False,
    ) -> None:
        self._cdll = cdll
        self._print_stats = print_stats
        self._defaults: dict[str, Any] = {
            "leave_pinned": leave_pinned,
            "cache_max_bytes": cache_max_bytes,
            "pending_max": pending_max,
        }
        self._log = log
        self._lock = threading.Lock()
        self._caches: list[GrdmaCache] = []
        #: Indexes of closed caches: their handles are freed at close_all, when
        #: no thread can be racing with a cache's close any more.
        self._retired: list[IntervalTree] = []

    def create(self, backend: Backend, **options: Any) -> GrdmaCache:
        unknown = sorted(set(options) - set(OPTIONS))
        if unknown:
            raise RcacheError(
                f"unknown grdma option(s) {', '.join(unknown)}; known: {', '.join(OPTIONS)}"
            )
        settings = {**self._defaults, **options}
        # The cache (and the release-event plumbing it needs) is imported with
        # the first cache: a session whose rcache creates none never needs it.
        from ._cache import GrdmaCache

        tree = IntervalTree(self._cdll)
        cache = GrdmaCache(
            tree,
            backend,
            leave_pinned=False,
            cache_max_bytes=int(settings["cache_max_bytes"]),
            pending_max=int(settings["pending_max"]),
            log=self._log,
            on_close=lambda closed: self._forget(closed, tree),
        )
        why = _subscribe(cache)
        cache.leave_pinned = _leave_pinned(settings["leave_pinned"], hooked=why is None)
        if why is not None and cache.leave_pinned:
            # Open MPI warns the same way: cached registrations can go stale.
            self._log.warning(
                "mpi_leave_pinned without memory hooks: cached registrations are never "
                "invalidated when their memory is released, and may send stale data",
                why=why,
            )
        with self._lock:
            self._caches.append(cache)
        self._log.debug("cache created", leave_pinned=cache.leave_pinned, coherent=cache.coherent)
        return cache

    def caches(self) -> list[GrdmaCache]:
        with self._lock:
            return list(self._caches)

    def close_all(self) -> None:
        for cache in self.caches():
            cache.close()
        with self._lock:
            retired, self._retired = self._retired, []
        for tree in retired:
            tree.destroy()

    def _forget(self, cache: GrdmaCache, tree: IntervalTree) -> None:
        with self._lock:
            if cache not in self._caches:
                return
            self._caches.remove(cache)
            self._retired.append(tree)
        if self._print_stats and cache.final_stats is not None:  # as Open MPI's grdma
            from .. import describe_stats

            print(f"rcache grdma: {describe_stats(cache.final_stats)}", file=sys.stderr, flush=True)


def _leave_pinned(value: object, *, hooked: bool) -> bool:
    """``mpi_leave_pinned``: 1 yes, 0 no, -1/None auto (yes when hooks catch releases)."""
    if value is None or value == -1:
        return hooked
    return bool(value)


def _subscribe(cache: GrdmaCache) -> str | None:
    """Deliver release events to ``cache``; why not, when there are no hooks."""
    from ... import memory, native
    from ._cache import ReleaseWatch

    try:
        handle = memory.register_release(cache.releases.record_batch, batch=True)
    except memory.MemoryHooksUnavailable as exc:
        return str(exc)
    hooks = native.backend()
    head, dropped = hooks.head_word, hooks.dropped_word
    watch = ReleaseWatch(
        head_address=ctypes.addressof(head),
        dropped_address=ctypes.addressof(dropped),
        check_address=native.check_address(),
        counters=lambda: (head.value, dropped.value),
    )
    # Eviction events queued under the cache lock leave from the release
    # drain or the listener thread, as release callbacks do.
    stop_delivering = native.dispatcher().add_check(cache.deliver_events)

    def unsubscribe() -> None:
        stop_delivering()
        handle.unregister()

    cache.subscribed(unsubscribe, drain=memory.drain, watch=watch)
    return None
