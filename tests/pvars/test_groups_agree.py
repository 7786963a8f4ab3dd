"""Every producer's group gives, for each member, what the member's own read gives.

A sweep reads a group's field where a handle reads the pvar alone, so a
group whose order disagrees with its members' registrations would make a
sweep report one pvar's value under another's name. Checked over every
grouped pvar of a real session with memory hooks, btls, p2p traffic and a
grdma cache that has hits, misses and a release.
"""

from __future__ import annotations

import mmap
from typing import Any

import pytest

import pmca
import pmca.native as native
from pmca._libc import PAGE, libc
from pmca.mca._pvars import REGISTRY
from pmca.rcache import UnpinnedBackend

pytestmark = pytest.mark.skipif(
    not native.available(), reason=f"native hook backend unavailable: {native.unavailable_reason()}"
)


def _grouped() -> list[tuple[str, Any, Any]]:
    """(name, source, obj) of every grouped source and each of its objects."""
    found = []
    for pvar in REGISTRY.pvars():
        for source in REGISTRY.entry(pvar.name).sources:
            if source.group is None or not source.alive:
                continue
            objects = [None] if source.objects is None else list(source.objects())
            found.extend((pvar.name, source, obj) for obj in objects)
    return found


def _agree(name: str, source: Any, obj: Any) -> None:
    # Counters may move between two reads (the interpreter's own frees are
    # releases too): compare once the group read the same before and after.
    for _ in range(20):
        before = list(source.group.group.read(obj))
        alone = source.read(obj)
        after = list(source.group.group.read(obj))
        if before == after:
            assert alone == before[source.group.index], (name, obj, before)
            return
    pytest.fail(f"{name} ({obj!r}) never held still for three reads")


def test_each_group_field_is_its_members_value(pmca_env) -> None:
    delivered: list[int] = []
    with pmca.Session(frameworks=["memory", "rcache", "btl"]) as s:
        subscription = pmca.memory.register_release(lambda *args: delivered.append(1))
        cache = pmca.rcache.create("grdma", UnpinnedBackend(), leave_pinned=True)
        base = libc().map_anonymous(16 * PAGE)
        try:
            libc().touch(base, 16 * PAGE)
            for _ in range(5):
                mmap.mmap(-1, 1 << 20).close()
            pmca.memory.drain()
            first = cache.register(base, 4 * PAGE)  # miss
            cache.deregister(cache.register(base + PAGE, PAGE))  # hit
            cache.deregister(first)
            p2p = s.p2p
            for tag in (1, 2, 3):
                p2p.send(0, tag, b"x" * tag)
            p2p.recv(0, 3, bytearray(3))  # two unexpected messages before it
            waiting = p2p.irecv(0, 9, bytearray(1))  # a posted receive
            grouped = _grouped()
            names = {name for name, _, _ in grouped}
            # every producer that groups its pvars is in this session
            for prefix in ("btl_self_", "memory_patcher_", "p2p_base_", "patcher_overwrite_"):
                assert any(name.startswith(prefix) for name in names), prefix
            assert "rcache_grdma_hits" in names and "pmca_session_init_time" in names
            for name, source, obj in grouped:
                _agree(name, source, obj)
            p2p.send(0, 9, b"y")
            waiting.wait(timeout=30)
            for tag in (1, 2):
                p2p.recv(0, tag, bytearray(tag))
        finally:
            cache.close()
            libc().munmap(base, 16 * PAGE)
            subscription.unregister()
