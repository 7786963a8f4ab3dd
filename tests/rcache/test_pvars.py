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
    names = ("hits", "misses", "invalidations", "pinned_bytes")
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
    assert h["misses"].readreset() == 3
    assert h["misses"].read() == 0


def test_a_cache_pvar_needs_a_cache(session: pmca.Session, cache: Any) -> None:
    ps = session.pvar_session()
    with pytest.raises(PVarError, match="bound per cache"):
        ps.handle("rcache_grdma_hits")
    with pytest.raises(PVarError, match="bound per cache"):
        ps.handle("rcache_grdma_hits", obj="grdma")
