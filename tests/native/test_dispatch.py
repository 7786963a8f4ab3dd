"""The ring, the doorbell and the Python-side fan-out, with real releases."""

from __future__ import annotations

import mmap
import threading
import time
import warnings

import pytest

import pmca.native as native
from pmca._libc import MADV_DONTNEED, MREMAP_FIXED, MREMAP_MAYMOVE, PAGE, libc

pytestmark = pytest.mark.native


class Recorder:
    def __init__(self) -> None:
        self.events: list[tuple[int, int, str, bool]] = []
        self.arrived = threading.Event()
        self.threads: set[str] = set()

    def __call__(self, address: int, length: int, kind: str, from_alloc: bool) -> None:
        self.events.append((address, length, kind, from_alloc))
        self.threads.add(threading.current_thread().name)
        self.arrived.set()

    def released_page(self, address: int) -> bool:
        """Whether the exact one-page munmap at ``address`` was delivered."""
        return (address, PAGE, "munmap", True) in self.events


def release_one_page() -> int:
    c = libc()
    region = c.map_anonymous(PAGE)
    c.munmap(region, PAGE)
    return region


def test_subscribers_receive_real_releases_from_drain(hooks):
    site = hooks.install("munmap")
    first, second = Recorder(), Recorder()
    a = native.dispatcher().subscribe(first)
    b = native.dispatcher().subscribe(second)
    try:
        region = release_one_page()
        assert native.dispatcher().drain() >= 0
        for recorder in (first, second):
            assert (region, PAGE, "munmap", True) in recorder.events
    finally:
        a.unregister()
        b.unregister()
        hooks.restore(site)


def test_listener_thread_delivers_without_anyone_draining(hooks):
    site = hooks.install("munmap")
    recorder = Recorder()
    subscription = native.dispatcher().subscribe(recorder)
    try:
        assert native.dispatcher().listening
        region = release_one_page()
        deadline = time.monotonic() + 10
        while not recorder.released_page(region) and time.monotonic() < deadline:
            recorder.arrived.wait(0.1)
        assert recorder.released_page(region)
        assert "pmca-release-listener" in recorder.threads
    finally:
        subscription.unregister()
        hooks.restore(site)
    assert not native.dispatcher().listening  # the last subscriber stopped it


def test_unregister_is_idempotent_and_stops_delivery(hooks):
    site = hooks.install("munmap")
    recorder = Recorder()
    subscription = native.dispatcher().subscribe(recorder)
    subscription.unregister()
    subscription.unregister()
    assert not subscription.active
    try:
        region = release_one_page()
        native.dispatcher().drain()
        # (A delivery already under way when unregister() ran may finish.)
        assert (region, PAGE, "munmap", True) not in recorder.events
    finally:
        hooks.restore(site)


def test_a_failing_callback_is_reported_and_does_not_stop_the_others(hooks):
    site = hooks.install("munmap")
    recorder = Recorder()

    def broken(address: int, length: int, kind: str, from_alloc: bool) -> None:
        raise ValueError("boom")

    dispatch = native.dispatcher()
    failing = dispatch.subscribe(broken)
    working = dispatch.subscribe(recorder)
    try:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            region = release_one_page()
            dispatch.drain()
        assert recorder.released_page(region)
        assert any("boom" in str(w.message) for w in caught)
    finally:
        failing.unregister()
        working.unregister()
        hooks.restore(site)


def test_callbacks_may_allocate_free_subscribe_and_unsubscribe(hooks):
    sites = [hooks.install("munmap"), hooks.install("madvise")]
    dispatch = native.dispatcher()
    late = Recorder()
    subscriptions: list[native.Subscription] = []

    def busy(address: int, length: int, kind: str, from_alloc: bool) -> None:
        with mmap.mmap(-1, 1 << 20) as scratch:  # releases memory from inside a callback
            scratch.madvise(MADV_DONTNEED)
        if len(subscriptions) == 1:
            subscriptions.append(dispatch.subscribe(late))
            subscriptions[0].unregister()

    subscriptions.append(dispatch.subscribe(busy))
    try:
        release_one_page()
        dispatch.drain()
        region = release_one_page()
        dispatch.drain()
        assert late.released_page(region)
        assert not subscriptions[0].active
    finally:
        for subscription in subscriptions:
            subscription.unregister()
        for site in reversed(sites):
            hooks.restore(site)


def test_disabled_hooks_pass_through_without_recording(hooks):
    site = hooks.install("munmap")
    recorder = Recorder()
    subscription = native.dispatcher().subscribe(recorder)
    try:
        hooks.set_enabled(False)
        calls = hooks.calls("munmap")
        region = release_one_page()
        native.dispatcher().drain()
        assert hooks.calls("munmap") > calls  # the hook ran ...
        assert not recorder.released_page(region)  # ... and recorded nothing
    finally:
        hooks.set_enabled(True)
        subscription.unregister()
        hooks.restore(site)


def test_the_listener_wait_returns_at_the_threshold_not_per_event(hooks):
    assert native.dispatcher().subscriber_count == 0  # nobody drains behind our back
    hooks.drain(hooks.capacity)
    pending = hooks.pending()
    assert hooks.wait(pending + 1000, 0.05) == 0  # nothing arrives: the timer
    woke: list[int] = []
    waiter = threading.Thread(target=lambda: woke.append(hooks.wait(pending + 1000, 30)))
    waiter.start()
    time.sleep(0.05)
    hooks.publish_synthetic(999)
    waiter.join(0.2)
    assert waiter.is_alive(), "woken before the threshold"
    hooks.publish_synthetic(1)  # the 1000th event crosses it
    waiter.join(10)
    assert not waiter.is_alive() and woke == [1]
    assert hooks.wait(10, 5) == 1  # already past the threshold: no sleep
    hooks.wake_listeners()
    while hooks.pending():
        hooks.pull()


def test_overflow_is_reported_with_the_dropped_count(hooks):
    assert native.dispatcher().subscriber_count == 0  # nobody drains behind our back
    site = hooks.install("munmap")
    try:
        while hooks.pending():
            hooks.pull()
        dropped_before = hooks.dropped_total()
        hooks.publish_synthetic(hooks.capacity - 1)
        region = release_one_page()  # the last free slot: a real release
        hooks.publish_synthetic(1000)  # no room
        drained = hooks.drain(hooks.capacity)
        assert len(drained.events) == hooks.capacity
        assert drained.events[-1] == native.ReleaseEvent(region, PAGE, "munmap", True)
        assert drained.overflowed and drained.dropped == 1000
        assert hooks.dropped_total() - dropped_before == 1000
        again = hooks.drain(10)  # each drop is reported once
        assert not again.overflowed and again.dropped == 0
    finally:
        hooks.restore(site)


def test_dispatcher_turns_overflow_into_an_everything_invalid_notification(hooks):
    assert native.dispatcher().subscriber_count == 0
    site = hooks.install("munmap")
    recorder = Recorder()
    # No listener, so that the ring surely overflows; a patient subscriber, so
    # that a loaded machine does not add a notice for falling behind.
    dispatch = native.ReleaseDispatcher(listen=False, max_lag=600)
    subscription = dispatch.subscribe(recorder)
    try:
        region = release_one_page()
        hooks.publish_synthetic(hooks.capacity + 10)
        dispatch.drain()
    finally:
        subscription.unregister()
        hooks.restore(site)
    overflow = [e for e in recorder.events if e[2] == "overflow"]
    assert overflow == [(0, native.END_OF_MEMORY, "overflow", True)]
    assert recorder.released_page(region)
    assert native.OVERFLOW_EVENT.overlaps(0, native.END_OF_MEMORY)


def test_shmdt_events_cover_everything_from_the_address(hooks):
    site = hooks.install("shmdt")
    recorder = Recorder()
    subscription = native.dispatcher().subscribe(recorder)
    c = libc()
    try:
        try:
            address = c.shm_attach_private(1 << 20)
        except OSError as exc:
            pytest.skip(f"no SysV shared memory here: {exc}")
        c.shmdt(address)
        native.dispatcher().drain()
        assert (address, native.END_OF_MEMORY - address, "shmdt", False) in recorder.events
    finally:
        subscription.unregister()
        hooks.restore(site)


def test_close_stops_the_listener_and_drops_subscribers(hooks):
    dispatch = native.dispatcher()
    subscription = dispatch.subscribe(Recorder())
    assert dispatch.listening
    dispatch.close()
    assert not dispatch.listening
    assert not subscription.active
    assert dispatch.subscriber_count == 0


def test_mremap_fixed_reports_the_old_and_the_replaced_range(hooks):
    site = hooks.install("mremap")
    recorder = Recorder()
    subscription = native.dispatcher().subscribe(recorder)
    c = libc()
    source = c.map_anonymous(2 * PAGE)
    target = c.map_anonymous(2 * PAGE)
    try:
        moved = c.mremap(source, 2 * PAGE, 2 * PAGE, MREMAP_MAYMOVE | MREMAP_FIXED, target)
        assert moved == target
        native.dispatcher().drain()
        assert (source, 2 * PAGE, "mremap", True) in recorder.events
        assert (target, 2 * PAGE, "mremap", True) in recorder.events
    finally:
        c.munmap(target, 2 * PAGE)
        subscription.unregister()
        hooks.restore(site)


def test_the_last_subscriber_may_unregister_itself_from_its_callback(hooks):
    site = hooks.install("munmap")
    subscriptions: list[native.Subscription] = []

    def once(address: int, length: int, kind: str, from_alloc: bool) -> None:
        subscriptions[0].unregister()  # stops the listener; must not wait for it here

    subscriptions.append(native.dispatcher().subscribe(once))
    try:
        release_one_page()
        drainer = threading.Thread(target=native.dispatcher().drain, daemon=True)
        drainer.start()
        drainer.join(10)
        assert not drainer.is_alive(), "drain() hung"
        assert not subscriptions[0].active
        deadline = time.monotonic() + 10
        while native.dispatcher().listening and time.monotonic() < deadline:
            time.sleep(0.01)
        assert not native.dispatcher().listening
    finally:
        hooks.restore(site)
