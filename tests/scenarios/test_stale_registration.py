"""Seed scenario 4: a registration cache without hooks sends a freed buffer's data."""

from __future__ import annotations

import pytest

import pmca
from pmca.scenarios import stale_registration
from pmca.scenarios.stale_registration import LENGTH, Memory, RegistrationCache

pytestmark = pytest.mark.usefixtures("native_backend")


def test_run_reproduces_without_hooks_and_prevents_with_them() -> None:
    without, with_hooks = stale_registration.run()
    assert without.outcome == "reproduced", without.detail
    assert "'AAAA'" in without.detail
    assert with_hooks.outcome == "prevented", with_hooks.detail
    assert "'BBBB'" in with_hooks.detail


def test_pinned_pages_outlive_the_users_mapping(pmca_env: dict[str, str]) -> None:
    # What makes a stale registration dangerous: the NIC's view of A's pages
    # stays valid after the user unmaps A.
    memory = Memory()
    cache = RegistrationCache(memory)
    a = memory.allocate(LENGTH, b"A")
    registration = cache.lookup(a.address, a.length)
    memory.free(a)
    assert registration.read() == b"A" * LENGTH
    b = memory.allocate(LENGTH, b"B", at=a.address)
    assert b.address == a.address
    assert cache.lookup(b.address, b.length) is registration  # the stale hit
    memory.free(b)
    memory.unpin(registration)


def test_hooks_invalidate_at_the_next_lookup(pmca_env: dict[str, str]) -> None:
    with pmca.Session(frameworks=["memory"]):
        memory = Memory()
        cache = RegistrationCache(memory)
        handle = pmca.memory.register_release(cache.on_release)
        cache.hooked = True
        a = memory.allocate(LENGTH, b"A")
        first = cache.lookup(a.address, a.length)
        memory.free(a)
        b = memory.allocate(LENGTH, b"B", at=a.address)
        sent = cache.lookup(b.address, b.length)
        handle.unregister()
        assert cache.invalidated == [first.key]
        assert sent.key != first.key
        assert sent.read() == b"B" * LENGTH
        memory.free(b)
        memory.unpin(sent)
