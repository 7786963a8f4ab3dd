"""grdma's pvars follow a scripted sequence of registrations and releases exactly."""

from __future__ import annotations

from typing import Any

import pytest

import pmca
from pmca._libc import PAGE
from pmca.mca import PVarError

from .conftest import Pool, needs_native


@needs_native
def test_hits_misses_and_pinned_peak_follow_the_script(
    session: pmca.Session, cache: Any, pool: Pool
) -> None:
    before = cache.register(pool.page(40), PAGE)  # a miss before the pvar session
    cache.deregister(before)
    ps = session.pvar_session()
    names = ("hits", "misses", "invalidations", "pinned_bytes", "evictions", "registrations")
    h = {n: ps.handle(f"rcache_grdma_{n}", obj=cache) for n in names}
    h["pinned_bytes"].start()  # a watermark is not continuous: it counts once started
    outer = cache.register(pool.page(0), 8 * PAGE)  # miss
    inner = cache.register(pool.page(2), 2 * PAGE)  # hit
    other = cache.register(pool.page(10), 4 * PAGE)  # miss
    for reg in (inner, outer, other):
        cache.deregister(reg)
    pool.release(10, 4)  # other's pages: one invalidation
    again = cache.register(pool.page(10), 4 * PAGE)  # miss: it was invalidated
    cache.deregister(again)
    assert h["hits"].read() == 1
    assert h["misses"].read() == 3
    assert h["invalidations"].read() == 1
    # Cached unused registrations stay pinned: 1 + 8 + 4 pages at the peak.
    assert h["pinned_bytes"].read() == (1 + 8 + 4) * PAGE
    # A sweep reads the cache once for all of them, and reads the same.
    expected = [1, 3, 1, (1 + 8 + 4) * PAGE, 0, h["registrations"].read()]
    assert ps.read_all() == expected == [h[n].read() for n in names]
    assert h["misses"].readreset() == 3
    assert h["misses"].read() == 0


def test_a_cache_pvar_needs_a_cache(session: pmca.Session, cache: Any) -> None:
    ps = session.pvar_session()
    with pytest.raises(PVarError, match="bound per cache"):
        ps.handle("rcache_grdma_hits")
    with pytest.raises(PVarError, match="bound per cache"):
        ps.handle("rcache_grdma_hits", obj="grdma")


@needs_native
def test_fast_and_full_lookups_count_where_the_index_branches(
    session: pmca.Session, cache: Any, pool: Pool
) -> None:
    registration = cache.register(pool.page(0), 4 * PAGE)
    assert cache.find(pool.page(1), PAGE) is registration  # every release applied now
    ps = session.pvar_session()
    fast = ps.handle("rcache_grdma_fast_lookups", obj=cache)
    full = ps.handle("rcache_grdma_full_lookups", obj=cache)
    pool.release(20, 1)  # a release the cache has not applied: the next lookup goes the full way
    assert cache.find(pool.page(1), PAGE) is registration
    assert (fast.readreset(), full.readreset()) == (0, 1)
    lookups = 2 * 4096
    for _ in range(lookups):
        cache.find(pool.page(2), PAGE)
    # Each lookup counted once; every 4096th takes the full path whatever happens.
    assert fast.read() + full.read() == lookups
    assert full.read() >= 2 and fast.read() > lookups // 2
    cache.deregister(registration)


@needs_native
def test_eviction_events_are_delivered_outside_the_cache_lock(
    session: pmca.Session, backend: Any, pool: Pool
) -> None:
    import threading
    import time

    from pmca.mca import Safety

    limited = pmca.rcache.create("grdma", backend, leave_pinned=True, cache_max_bytes=4 * PAGE)
    seen: list[tuple[dict[str, Any], bool, str]] = []

    def on_eviction(name: str, fields: Any) -> None:
        # Under the cache lock in this thread, this would time out (it is not re-entrant).
        free = limited._lock.acquire(timeout=10)
        if free:
            limited._lock.release()
        seen.append((dict(fields), free, threading.current_thread().name))

    listening = session.register_event("rcache_grdma_eviction", on_eviction, Safety.THREAD_SAFE)
    try:
        for first in (0, 4, 8):  # each cached registration pushes the one before out
            registration = limited.register(pool.page(first), 4 * PAGE)
            limited.deregister(registration)
        deadline = time.monotonic() + 60
        while len(seen) < 2 and time.monotonic() < deadline:
            pmca.memory.drain()  # or the listener thread, whichever comes first
            time.sleep(0.02)
        evicted = [(f["cache"], f["address"], f["length"], f["reason"]) for f, _, _ in seen]
        assert evicted == [
            (limited, pool.page(0), 4 * PAGE, "limit"),
            (limited, pool.page(4), 4 * PAGE, "limit"),
        ]
        assert all(free for _, free, _ in seen)
        main = threading.main_thread().name
        assert {thread for _, _, thread in seen} <= {main, "pmca-release-listener"}
        assert limited.stats().evictions == 2
    finally:
        listening.unregister()
        limited.close()
