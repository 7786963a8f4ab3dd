"""Reading the memory pvars costs no call into the native library: counters are read in place."""

from __future__ import annotations

import mmap

import pytest

import pmca
import pmca.native as native
from pmca.mca._pvars import REGISTRY

pytestmark = pytest.mark.skipif(
    not native.available(), reason=f"native hook backend unavailable: {native.unavailable_reason()}"
)

_FIELDS = {
    "memory_patcher_events_published": "published",
    "memory_patcher_events_delivered": "delivered",
    "memory_patcher_events_dropped": "dropped",
    "memory_patcher_overflows": "overflows",
    "memory_patcher_lagged": "lagged",
}


def test_memory_pvars_follow_stats_without_calling_it(pmca_env, monkeypatch) -> None:
    with pmca.Session(frameworks=["memory"]):
        handle = pmca.memory.register_release(lambda *_: None)
        try:
            for _ in range(20):
                mmap.mmap(-1, 1 << 20).close()
            pmca.memory.drain()
            before = native.stats()

            def refuse() -> None:
                raise AssertionError("a pvar read called pmca.native.stats()")

            # Python's own allocator may release memory meanwhile: the counters
            # only grow, so each read lies between the two snapshots.
            monkeypatch.setattr(native, "stats", refuse)
            read = {name: REGISTRY.read(name) for name in _FIELDS}
            monkeypatch.undo()
            after = native.stats()
        finally:
            handle.unregister()
    for name, field in _FIELDS.items():
        assert getattr(before, field) <= read[name] <= getattr(after, field), (name, read)
    assert read["memory_patcher_events_published"] >= 20
    assert read["memory_patcher_events_delivered"] >= 20
