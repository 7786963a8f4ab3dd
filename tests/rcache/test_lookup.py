"""The one-call lookup: the native index against a brute-force model, and the
cache's fast path never handing out what a release already invalidated."""

from __future__ import annotations

import ctypes
import random
import sys
import threading
from collections.abc import Iterator
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pmca._libc import PAGE
from pmca.rcache import RcacheError
from pmca.rcache.grdma import IntervalTree
from pmca.rcache.grdma._tree import FULL_PATH, library_path
from pmca.testing._subprocess import run_python

from ..memory.test_overwrite import OVERWRITE
from ..native.test_processes import COMMON
from .conftest import Pool, needs_native


@pytest.fixture(scope="module")
def index_library() -> ctypes.CDLL:
    return ctypes.CDLL(str(library_path()))


@pytest.fixture
def index(index_library: ctypes.CDLL) -> Iterator[IntervalTree]:
    tree = IntervalTree(index_library)
    yield tree
    tree.destroy()


# Few distinct bases and bounds: many equal bases (entries ordered by key
# among them), many covering candidates; up to hundreds of entries, so that
# blocks split, empty, merge and the directory grows.
SPAN = 400
width = st.integers(1, 40) | st.integers(1, SPAN)  # short ones, and some that span blocks
operation = st.one_of(
    st.tuples(st.just("insert"), st.integers(0, SPAN), width),
    st.tuples(st.just("remove"), st.integers(0, 10_000), st.just(0)),
    st.tuples(st.just("clear"), st.just(0), st.just(0)),
)


@settings(max_examples=60, deadline=None)
@given(
    st.lists(operation, min_size=1, max_size=600),
    st.lists(st.tuples(st.integers(0, SPAN + 40), width), min_size=20, max_size=20),
)
def test_the_index_answers_like_a_list(
    index_library: ctypes.CDLL, operations: list[tuple[str, int, int]], queries: list[Any]
) -> None:
    tree = IntervalTree(index_library)
    model: dict[int, tuple[int, int]] = {}  # key -> (base, bound)
    try:
        for number, (kind, first, second) in enumerate(operations):
            if kind == "insert":
                tree.insert(first, first + second, number)
                model[number] = (first, first + second)
            elif kind == "remove" and model:
                key = sorted(model)[first % len(model)]
                assert tree.remove(model.pop(key)[0], key)
                assert not tree.remove(0, 10**9)  # absent: refused
            elif kind == "clear" and number % 7 == 0:
                tree.clear()
                model.clear()
        assert len(tree) == len(model)
        for low, width in queries:
            high = low + width
            covering = {k for k, (b, e) in model.items() if b <= low and high <= e}
            found = tree.find_covering(low, high)
            assert (found in covering) if covering else found is None
            hits = sorted((b, k) for k, (b, e) in model.items() if b < high and e > low)
            assert tree.overlapping(low, high) == [k for _, k in hits]
    finally:
        tree.destroy()


Model = dict[int, tuple[int, int]]  # key -> (base, bound)


def check_against(tree: IntervalTree, model: Model, rng: random.Random) -> None:
    assert len(tree) == len(model)
    bases = sorted(b for b, _ in model.values())
    for number in range(80):
        if number % 2 and bases:  # at an existing base, or just before or after it
            low = rng.choice(bases) + rng.choice((-1, 0, 0, 1))
        else:
            low = rng.randrange(-10, 100_010)
        high = low + rng.choice((1, 1, 10, 1000, 30_000))
        covering = {k for k, (b, e) in model.items() if b <= low and high <= e}
        found = tree.find_covering(max(low, 0), high)
        assert (found in covering) if covering else found is None, (low, high)
        hits = sorted((b, k) for k, (b, e) in model.items() if b < high and e > low)
        assert tree.overlapping(max(low, 0), high) == [k for _, k in hits], (low, high)


def test_the_index_grows_and_shrinks_like_a_list(index: IntervalTree) -> None:
    """Thousands of entries: blocks split, merge and empty, the directory grows."""
    rng = random.Random(7)
    model: dict[int, tuple[int, int]] = {}
    for key in range(3000):
        base = rng.randrange(0, 100_000) if key % 3 else rng.randrange(0, 100) * 1000
        # Mostly short and sparse (a missed interval is rarely hidden by
        # another covering one), a few long ones spanning many blocks.
        width = 40_000 if key % 97 == 0 else rng.choice((1, 2, 3, 8, 50))
        model[key] = (base, base + width)
        index.insert(*model[key], key)
        if key % 250 == 0:
            check_against(index, model, rng)
    check_against(index, model, rng)
    for step, key in enumerate(rng.sample(sorted(model), len(model))):
        assert index.remove(model.pop(key)[0], key)
        if step % 250 == 0 or len(model) < 5:
            check_against(index, model, rng)
    assert len(index) == 0 and index.find_covering(0, 1) is None


def test_duplicates_closed_and_huge_batches(index: IntervalTree) -> None:
    for key in range(300):
        index.insert(0, 10 + key, key)
    with pytest.raises(KeyError, match="already holds key 5"):
        index.insert(0, 99, 5)
    assert len(index.overlapping(0, 1)) == 300  # more than one batch
    assert index.find_covering(5, 309) == 299
    index.close()
    with pytest.raises(ValueError, match="closed"):
        index.find_covering(0, 1)
    with pytest.raises(ValueError, match="closed"):
        index.insert(0, 1, 1)


@needs_native
def test_a_release_between_two_lookups_is_seen_by_the_second(cache: Any, pool: Pool) -> None:
    regs = [cache.register(pool.page(n), PAGE) for n in range(8)]
    for reg in regs:
        cache.deregister(reg)
    for _ in range(3):  # the first may take the full path; the others are one call
        assert [cache.find(pool.page(n), PAGE) for n in range(8)] == regs
    for n in range(8):
        pool.release(n, 1)  # no drain, no other cache operation in between
        assert cache.find(pool.page(n), PAGE) is None
        assert cache.find(pool.page(n + 1), PAGE) is (regs[n + 1] if n < 7 else None)
        fresh = cache.register(pool.page(n), PAGE)
        assert fresh is not regs[n] and fresh.valid
        cache.deregister(fresh)
        assert cache.register(pool.page(n), PAGE) is fresh  # a one-call hit again
        cache.deregister(fresh)


@needs_native
def test_a_release_in_another_thread_is_seen_once_it_returned(cache: Any, pool: Pool) -> None:
    for round_ in range(20):
        page = round_ % 16
        reg = cache.register(pool.page(page), PAGE)
        cache.deregister(reg)
        assert cache.find(pool.page(page), PAGE) is reg
        releaser = threading.Thread(target=pool.release, args=(page, 1))
        releaser.start()
        releaser.join()
        assert cache.find(pool.page(page), PAGE) is None


@needs_native
def test_the_fast_path_names_bad_ranges_and_a_closed_cache(cache: Any, pool: Pool) -> None:
    cache.deregister(cache.register(pool.page(0), PAGE))
    for address, size in ((pool.page(0), 0), (-PAGE, PAGE), (pool.page(0), -1), (2**64, 1)):
        with pytest.raises(ValueError, match="rcache: "):
            cache.find(address, size)
        with pytest.raises(ValueError, match="rcache: "):
            cache.register(address, size)
    cache.close()
    with pytest.raises(RcacheError, match="closed"):
        cache.find(pool.page(0), PAGE)
    with pytest.raises(RcacheError, match="closed"):
        cache.register(pool.page(0), PAGE)


@needs_native
def test_the_one_call_lookup_keeps_reference_counts(cache: Any, pool: Pool) -> None:
    """The index hands back the registration object itself: never one reference short."""
    reg = cache.register(pool.page(0), PAGE)
    cache.find(pool.page(0), PAGE)
    held, slow = sys.getrefcount(reg), sys.getrefcount(FULL_PATH)
    for round_ in range(5000):  # some take the full path (every 4096th does)
        assert cache.find(pool.page(0), PAGE) is reg
        assert cache.find(pool.page(40), PAGE) is None
        if round_ % 1000 == 0:
            pool.release(50, 1)
    assert (sys.getrefcount(reg), sys.getrefcount(FULL_PATH)) == (held, slow)
    cache.deregister(reg)


OVERWRITTEN = """
import pmca
from pmca.rcache import UnpinnedBackend

with pmca.Session():
    rc = pmca.rcache.create("grdma", UnpinnedBackend(), leave_pinned=True)
    address = c.map_anonymous(4 * PAGE)
    reg = rc.register(address, 4 * PAGE)
    rc.deregister(reg)
    assert rc.find(address, PAGE) is reg and rc.find(address, PAGE) is reg  # one call each
    overwrite_with_original("munmap")
    c.munmap(address, 4 * PAGE)  # unseen by the hooks now
    # No drain in between: the lookup's own check notices the overwrite.
    assert rc.find(address, PAGE) is None and not reg.valid
    assert rc.stats().overflows == 1
print("overwrite seen")
"""


@needs_native
def test_an_overwritten_hook_is_noticed_by_the_one_call_lookup() -> None:
    result = run_python(COMMON + OVERWRITE + OVERWRITTEN, timeout=60)
    assert "overwrite seen" in result.stdout, result.stderr
    assert result.stderr.count("memory hooks overwritten") == 1, result.stderr
