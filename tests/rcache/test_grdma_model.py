"""grdma against a brute-force model: random register/deregister/release sequences.

The releases are real (``madvise(MADV_DONTNEED)`` through the patched libc,
delivered by the memory hooks); the model applies them at once, the cache
at its next operation, and both must answer the same at every step.
"""

from __future__ import annotations

from collections import OrderedDict
from typing import Any

from attrs import define
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import pmca
from pmca._libc import PAGE
from pmca.rcache import UnpinnedBackend

from .conftest import Pool, needs_native

pytestmark = needs_native

PAGES = 24
LIMIT = 6 * PAGE


@define
class Entry:
    key: int
    base: int
    bound: int
    refcount: int = 1
    valid: bool = True


class Model:
    """grdma's rules, written the slow and obvious way."""

    def __init__(self, leave_pinned: bool) -> None:
        self.leave_pinned = leave_pinned
        self.entries: dict[int, Entry] = {}
        self.lru: OrderedDict[int, Entry] = OrderedDict()
        self.live: set[int] = set()
        self.next_key = 1
        self.hits = self.misses = self.evictions = self.invalidations = self.pinned = 0

    def covering(self, address: int, size: int) -> set[int]:
        """Keys of every valid registration containing the request's pages."""
        base, bound = address - address % PAGE, -(-(address + size) // PAGE) * PAGE
        return {
            e.key for e in self.entries.values() if e.valid and e.base <= base and bound <= e.bound
        }

    def register(self, address: int, size: int, chosen: int) -> int:
        """The cache may reuse any covering registration: the model checks it chose one."""
        base, bound = address - address % PAGE, -(-(address + size) // PAGE) * PAGE
        covering = self.covering(address, size)
        if covering:
            assert chosen in covering, (chosen, covering)
            entry = self.entries[chosen]
            if entry.refcount == 0:
                self.lru.pop(entry.key)
            entry.refcount += 1
            self.hits += 1
            return entry.key
        self.misses += 1
        entry = Entry(self.next_key, base, bound)
        self.next_key += 1
        self.entries[entry.key] = entry
        self.live.add(entry.key)
        self.pinned += bound - base
        if self.leave_pinned:
            self.trim()
        return entry.key

    def trim(self) -> None:
        while self.pinned > LIMIT and self.lru:
            _, victim = self.lru.popitem(last=False)
            victim.valid = False
            self.evictions += 1
            self.discard(victim)

    def discard(self, entry: Entry) -> None:
        self.live.discard(entry.key)
        self.pinned -= entry.bound - entry.base

    def deregister(self, key: int) -> None:
        entry = self.entries[key]
        entry.refcount -= 1
        if entry.refcount:
            return
        if entry.valid and self.leave_pinned:
            self.lru[key] = entry
            self.trim()
        else:
            entry.valid = False
            self.discard(entry)

    def release(self, low: int, high: int) -> None:
        for entry in self.entries.values():
            if entry.valid and entry.base < high and low < entry.bound:
                entry.valid = False
                self.invalidations += 1
                if entry.refcount == 0:
                    self.lru.pop(entry.key)
                    self.discard(entry)


page = st.integers(0, PAGES - 1)
operation = st.one_of(
    st.tuples(st.just("register"), page, st.integers(0, PAGE - 1), st.integers(1, 4 * PAGE)),
    st.tuples(st.just("deregister"), st.integers(0, 1000)),
    st.tuples(st.just("release"), page, st.integers(1, 4)),
    st.tuples(st.just("invalidate"), page, st.integers(1, 3 * PAGE)),
    st.tuples(st.just("find"), page, st.integers(1, 2 * PAGE)),
)


def _run(pool: Pool, ops: list[tuple[Any, ...]], leave_pinned: bool) -> None:
    backend = UnpinnedBackend()
    model = Model(leave_pinned)
    rc: Any = pmca.rcache.create("grdma", backend, leave_pinned=leave_pinned, cache_max_bytes=LIMIT)
    held: list[Any] = []
    try:
        for op in ops:
            kind = op[0]
            if kind == "register":
                _, first, offset, size = op
                address = pool.page(first) + offset
                size = min(size, pool.page(PAGES) + 8 * PAGE - address)
                reg = rc.register(address, size)
                assert reg.key == model.register(address, size, reg.key), op
                held.append(reg)
            elif kind == "deregister" and held:
                reg = held.pop(op[1] % len(held))
                rc.deregister(reg)
                model.deregister(reg.key)
            elif kind == "release":
                _, first, count = op
                pool.release(first, count)
                model.release(pool.page(first), pool.page(first + count))
            elif kind == "invalidate":
                _, first, size = op
                model.release(pool.page(first), pool.page(first) + size)
                rc.invalidate(pool.page(first), size)
            elif kind == "find":
                _, first, size = op
                found = rc.find(pool.page(first), size)
                covering = model.covering(pool.page(first), size)
                assert (found.key in covering) if found else not covering, (op, covering)
            stats = rc.stats()
            expected = (model.hits, model.misses, model.evictions, model.invalidations)
            assert (stats.hits, stats.misses, stats.evictions, stats.invalidations) == expected
            assert stats.pinned_bytes == model.pinned, op
            assert backend.live == len(model.live), op
            assert stats.cached == len(model.lru), op
    finally:
        rc.close()
    assert backend.live == 0


@settings(
    max_examples=40,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)
@given(ops=st.lists(operation, min_size=1, max_size=40), leave_pinned=st.booleans())
def test_grdma_answers_like_the_model(
    pmca_env: dict[str, str], ops: list[tuple[Any, ...]], leave_pinned: bool
) -> None:
    pool = Pool(PAGES + 8)
    try:
        with pmca.Session():
            _run(pool, ops, leave_pinned)
    finally:
        pool.close()
