"""The memory and patcher pvars follow real releases and real patches."""

from __future__ import annotations

import mmap

import pytest

import pmca
import pmca.native as native

pytestmark = pytest.mark.skipif(
    not native.available(), reason=f"native hook backend unavailable: {native.unavailable_reason()}"
)


def test_delivered_counts_what_the_only_subscriber_received(pmca_env) -> None:
    received: list[int] = []

    def record(address: int, length: int, kind: str, from_alloc: bool) -> None:
        received.append(length)

    with pmca.Session(frameworks=["memory"]) as s:
        ps = s.pvar_session()
        installed = ps.handle("patcher_overwrite_patches_installed")
        restored = ps.handle("patcher_overwrite_patches_restored")
        handle = pmca.memory.register_release(record)
        assert installed.read() > 0  # the first subscriber installed the hooks
        support = ps.handle("memory_patcher_support")
        assert support.read() == int(pmca.memory.support_level()) != 0
        pmca.memory.drain()
        received.clear()
        delivered = ps.handle("memory_patcher_events_delivered")
        published = ps.handle("memory_patcher_events_published")
        for _ in range(10):
            mmap.mmap(-1, 1 << 20).close()
        pmca.memory.drain()
        handle.unregister()
        # One subscriber: every delivery since the handle is one call of ours.
        assert delivered.read() == len(received) >= 10
        assert published.read() >= 10
    # The last session's finalize restored every patch this session installed.
    assert restored.read() == installed.read() > 0
