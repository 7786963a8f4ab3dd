"""grdma semantics with real release events: rounding, reuse, LRU, invalidation, deferral."""

from __future__ import annotations

import threading
from typing import Any

import pytest

import pmca
from pmca._libc import PAGE, libc
from pmca.native._events import END_OF_MEMORY
from pmca.rcache import RcacheError, Registration, UnpinnedBackend

from .conftest import Pool, needs_native

pytestmark = needs_native


def test_pages_are_rounded_outwards(cache: Any, pool: Pool) -> None:
    reg = cache.register(pool.page(1) + 10, PAGE)
    assert (reg.base, reg.bound) == (pool.page(1), pool.page(3))
    assert reg.refcount == 1 and reg.valid
    cache.deregister(reg)


def test_a_covering_registration_is_reused(
    cache: Any, pool: Pool, backend: UnpinnedBackend
) -> None:
    outer = cache.register(pool.page(0), 8 * PAGE)
    inner = cache.register(pool.page(2) + 100, 2 * PAGE)
    assert inner is outer and outer.refcount == 2
    partly = cache.register(pool.page(6), 4 * PAGE)  # sticks out: a new one
    assert partly is not outer
    assert backend.registered == 2
    stats = cache.stats()
    assert (stats.hits, stats.misses, stats.pinned_bytes) == (1, 2, 12 * PAGE)
    for reg in (inner, outer, partly):
        cache.deregister(reg)


def test_deregistering_more_than_registered_is_refused(cache: Any, pool: Pool) -> None:
    reg = cache.register(pool.page(0), PAGE)
    cache.deregister(reg)
    with pytest.raises(RcacheError, match="more often than registered"):
        cache.deregister(reg)
    with pytest.raises(RcacheError, match="does not belong"):
        cache.deregister(Registration(pool.page(0), pool.page(1), None, refcount=1, key=999))


def test_bad_ranges_and_options_are_named(session: pmca.Session, cache: Any) -> None:
    with pytest.raises(ValueError, match="size must be > 0"):
        cache.register(4096, 0)
    with pytest.raises(RcacheError, match=r"unknown grdma option.*colour"):
        pmca.rcache.create("grdma", UnpinnedBackend(), colour="red")
    with pytest.raises(RcacheError, match="'nope' is not selected"):
        pmca.rcache.create("nope", UnpinnedBackend())
    with pytest.raises(RcacheError, match="no register"):
        pmca.rcache.create("grdma", object())  # type: ignore[arg-type]


def test_create_needs_a_session(pmca_env: dict[str, str]) -> None:
    with pytest.raises(RcacheError, match="no pmca session has the rcache framework open"):
        pmca.rcache.create("grdma", UnpinnedBackend())


def test_leave_pinned_keeps_unused_registrations_up_to_the_byte_limit(
    session: pmca.Session, pool: Pool
) -> None:
    backend = UnpinnedBackend()
    rc = pmca.rcache.create("grdma", backend, leave_pinned=True, cache_max_bytes=3 * PAGE)
    regs = [rc.register(pool.page(2 * n), PAGE) for n in range(3)]
    for reg in regs:
        rc.deregister(reg)
    assert backend.live == 3 and rc.stats().cached == 3
    again = rc.register(pool.page(0), PAGE)  # a hit moves it to most recently used
    assert again is regs[0]
    rc.deregister(again)
    rc.deregister(rc.register(pool.page(20), PAGE))  # a fourth: evicts the LRU one
    assert not regs[1].valid and regs[0].valid and regs[2].valid
    stats = rc.stats()
    assert (stats.evictions, stats.cached, stats.pinned_bytes) == (1, 3, 3 * PAGE)
    assert backend.live == 3
    rc.close()
    assert backend.live == 0


def test_without_leave_pinned_unused_registrations_go_at_once(
    session: pmca.Session, pool: Pool
) -> None:
    backend = UnpinnedBackend()
    rc = pmca.rcache.create("grdma", backend, leave_pinned=False)
    reg = rc.register(pool.page(0), PAGE)
    shared = rc.register(pool.page(0), 10)
    rc.deregister(reg)
    assert backend.live == 1  # still held once
    rc.deregister(shared)
    assert backend.live == 0 and not reg.valid
    rc.close()


def test_a_release_invalidates_every_overlapping_registration(
    cache: Any, pool: Pool, backend: UnpinnedBackend
) -> None:
    regs = [cache.register(pool.page(n), 2 * PAGE) for n in range(0, 12, 2)]
    for reg in regs:
        cache.deregister(reg)
    pool.release(3, 4)  # pages 3..6 touch the registrations at 2, 4 and 6
    assert cache.find(pool.page(0), PAGE) is regs[0]
    assert [reg.valid for reg in regs] == [True, False, False, False, True, True]
    stats = cache.stats()
    assert stats.invalidations == 3 and stats.registrations == 3
    assert backend.live == 3


def test_a_held_registration_is_invalidated_but_released_only_by_its_holder(
    cache: Any, pool: Pool, backend: UnpinnedBackend
) -> None:
    reg = cache.register(pool.page(0), PAGE)
    pool.release(0, 1)
    assert cache.find(pool.page(0), PAGE) is None
    assert not reg.valid and backend.live == 1
    fresh = cache.register(pool.page(0), PAGE)
    assert fresh is not reg
    cache.deregister(reg)
    assert backend.live == 1
    cache.deregister(fresh)


def test_transport_deregistration_waits_for_the_next_operation(
    session: pmca.Session, pool: Pool
) -> None:
    calls: list[str] = []
    released = threading.Event()

    class Recording(UnpinnedBackend):
        def deregister(self, handle: object) -> None:
            calls.append(threading.current_thread().name)
            super().deregister(handle)  # type: ignore[arg-type]

    def watch(address: int, length: int, kind: str, from_alloc: bool) -> None:
        if address <= pool.page(0) < address + length:
            released.set()

    rc = pmca.rcache.create("grdma", Recording(), leave_pinned=True)
    rc.deregister(rc.register(pool.page(0), PAGE))
    handle = pmca.memory.register_release(watch)
    try:
        pool.release(0, 1)
        assert released.wait(10), "the release event never arrived"
        assert calls == []  # delivered (maybe on the listener), not acted on
        assert rc.find(pool.page(0), PAGE) is None
        assert calls == [threading.current_thread().name]
    finally:
        handle.unregister()
        rc.close()


def test_too_many_pending_releases_invalidate_everything(session: pmca.Session, pool: Pool) -> None:
    backend = UnpinnedBackend()
    rc = pmca.rcache.create("grdma", backend, leave_pinned=True, pending_max=4)
    far = [rc.register(pool.page(n), PAGE) for n in (40, 50)]
    for reg in far:
        rc.deregister(reg)
    scratch = Pool(8)
    try:
        for page in range(8):  # eight releases nowhere near the registrations
            scratch.release(page, 1)
    finally:
        scratch.close()
    assert rc.find(pool.page(40), PAGE) is None
    stats = rc.stats()
    assert stats.overflows == 1 and stats.registrations == 0 and backend.live == 0
    rc.close()


def test_the_overflow_notification_invalidates_everything(cache: Any, pool: Pool) -> None:
    reg = cache.register(pool.page(0), PAGE)
    cache.releases.record(0, END_OF_MEMORY, "overflow", True)  # what the dispatcher sends
    assert cache.find(pool.page(0), PAGE) is None and not reg.valid
    assert cache.stats().overflows == 1
    cache.deregister(reg)


def test_explicit_invalidate(cache: Any, pool: Pool, backend: UnpinnedBackend) -> None:
    regs = [cache.register(pool.page(n), PAGE) for n in range(4)]
    for reg in regs:
        cache.deregister(reg)
    assert cache.invalidate(pool.page(1), 2 * PAGE) == 2
    assert backend.live == 2


def test_munmap_of_the_memory_invalidates(cache: Any, backend: UnpinnedBackend) -> None:
    address = libc().map_anonymous(4 * PAGE)
    cache.deregister(cache.register(address, 4 * PAGE))
    libc().munmap(address, 4 * PAGE)
    assert cache.find(address, PAGE) is None
    assert backend.live == 0


def test_the_session_end_closes_its_caches(pmca_env: dict[str, str], pool: Pool) -> None:
    backend = UnpinnedBackend()
    with pmca.Session():
        rc = pmca.rcache.create("grdma", backend)
        rc.register(pool.page(0), PAGE)  # still held at finalize
    assert backend.live == 0
    with pytest.raises(RcacheError, match="closed"):
        rc.register(pool.page(0), PAGE)


def test_without_hooks_the_cache_is_not_coherent(pmca_env: dict[str, str], pool: Pool) -> None:
    with pmca.Session(mca={"memory": "none"}):
        rc = pmca.rcache.create("grdma", UnpinnedBackend())
        assert not rc.coherent and not rc.leave_pinned  # auto: no hooks, no leave_pinned
        forced = pmca.rcache.create("grdma", UnpinnedBackend(), leave_pinned=True)
        reg = forced.register(pool.page(0), PAGE)
        forced.deregister(reg)
        pool.release(0, 1)
        assert forced.find(pool.page(0), PAGE) is reg  # the stale-registration hazard


def test_print_stats_reports_each_cache_as_it_closes(
    pmca_env: dict[str, str], pool: Pool, capfd: pytest.CaptureFixture[str]
) -> None:
    with pmca.Session(mca={"rcache_grdma_print_stats": "1"}):
        rc = pmca.rcache.create("grdma", UnpinnedBackend(), leave_pinned=True)
        rc.deregister(rc.register(pool.page(0), PAGE))
        rc.deregister(rc.register(pool.page(0), PAGE))
        assert capfd.readouterr().err == ""
    assert "rcache grdma: hits 1, misses 1, evictions 0" in capfd.readouterr().err
