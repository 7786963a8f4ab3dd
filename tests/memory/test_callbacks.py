"""Release callbacks: what they get, where they run, and how their handles live and die."""

from __future__ import annotations

import mmap
import subprocess
import threading

import pytest

import pmca
from pmca._libc import MADV_DONTNEED, PAGE, libc
from pmca.testing import run_python

MODES = pytest.mark.parametrize("mode", ["none", "all"], ids=["static", "dso"])

Event = tuple[int, int, str, bool]


class Recorder:
    """A release callback that remembers what it got and on which thread."""

    def __init__(self) -> None:
        self.events: list[Event] = []
        self.threads: list[str] = []
        self.lock = threading.Lock()

    def __call__(self, address: int, length: int, kind: str, from_alloc: bool) -> None:
        with self.lock:
            self.events.append((address, length, kind, from_alloc))
            self.threads.append(threading.current_thread().name)

    def covering(self, address: int, length: int, kind: str) -> list[Event]:
        with self.lock:
            return [
                e
                for e in self.events
                if e[2] == kind and e[0] <= address and address + length <= e[0] + e[1]
            ]


def mapped_address(region: mmap.mmap) -> int:
    import ctypes

    view = ctypes.c_char.from_buffer(region)
    try:
        return ctypes.addressof(view)
    finally:
        del view


@MODES
def test_callback_gets_address_length_kind_from_alloc(mode: str) -> None:
    recorder = Recorder()
    with pmca.Session(mca={"mca_base_component_dso": mode}, frameworks=["memory"]):
        handle = pmca.memory.register_release(recorder)
        region = mmap.mmap(-1, 1 << 20)
        address = mapped_address(region)
        region.close()
        assert pmca.memory.drain() >= 0
        handle.unregister()
    (event, *_) = recorder.covering(address, 1 << 20, "munmap")
    got_address, length, kind, from_alloc = event
    assert (type(got_address), type(length), type(kind), type(from_alloc)) == (
        int,
        int,
        str,
        bool,
    )
    assert got_address == address
    assert length == 1 << 20
    assert from_alloc is True  # Open MPI's meaning: it may come from inside an allocator


def test_callbacks_never_run_inside_the_release() -> None:
    # If a callback ran inside the hook it would run on this thread while
    # the libc call is still under way: exactly what `inside` marks.
    inside = threading.local()
    inside.value = False
    caught: list[tuple[str, bool]] = []

    def spy(address: int, length: int, kind: str, from_alloc: bool) -> None:
        caught.append((threading.current_thread().name, getattr(inside, "value", False)))

    c = libc()
    with pmca.Session(frameworks=["memory"]):
        handle = pmca.memory.register_release(spy)
        for _ in range(50):
            region = c.map_anonymous(4 * PAGE)
            c.touch(region, 4 * PAGE)
            inside.value = True
            c.madvise(region, 4 * PAGE, MADV_DONTNEED)
            c.munmap(region, 4 * PAGE)
            inside.value = False
        pmca.memory.drain()
        handle.unregister()
    assert caught, "no release reached the callback"
    assert not [entry for entry in caught if entry[1]], "a callback ran inside a release call"


def test_listener_thread_delivers_without_drain() -> None:
    arrived = threading.Event()
    seen: list[str] = []
    region = mmap.mmap(-1, 1 << 20)
    address = mapped_address(region)

    def watch(got: int, length: int, kind: str, from_alloc: bool) -> None:
        if kind == "munmap" and got == address:
            seen.append(threading.current_thread().name)
            arrived.set()

    with pmca.Session(frameworks=["memory"]):
        handle = pmca.memory.register_release(watch)
        region.close()
        # Nobody drains: only the listener thread can deliver this event.
        delivered = arrived.wait(timeout=60)
        handle.unregister()
    assert delivered, "the listener never delivered the munmap"
    assert seen == ["pmca-release-listener"]


ALLOCATING_CALLBACK = """
import ctypes, faulthandler, mmap, threading
import pmca

faulthandler.dump_traceback_later(100, exit=True)  # a stack dump if it hangs
libc = ctypes.CDLL("libc.so.6")
libc.malloc_trim.argtypes = [ctypes.c_size_t]
lock = threading.Lock()  # not reentrant, like libfabric's mm_lock
seen = {"calls": 0, "kinds": set(), "threads": set()}

def on_release(address, length, kind, from_alloc):
    with lock:
        seen["calls"] += 1
        seen["kinds"].add(kind)
        seen["threads"].add(threading.current_thread().name)
        junk = [bytearray(256 * 1024) for _ in range(4)]
        junk.extend(bytes(100) for _ in range(1000))
        del junk
        libc.malloc_trim(0)

with pmca.Session():
    handle = pmca.memory.register_release(on_release)
    for i in range(300):
        with lock:  # allocate and free heavily while holding the callback's lock
            blocks = [bytearray(1 << 20) for _ in range(4)]
            small = [bytearray(64 * 1024) for _ in range(32)]
            del blocks, small
            libc.malloc_trim(0)
            region = mmap.mmap(-1, 1 << 16)
            region.close()
        if i % 25 == 0:
            pmca.memory.drain()
    pmca.memory.drain()
    handle.unregister()
print("done", seen["calls"], ",".join(sorted(seen["kinds"])), ",".join(sorted(seen["threads"])))
"""


def test_callback_that_allocates_and_takes_a_held_lock_does_not_deadlock() -> None:
    try:
        result = run_python(ALLOCATING_CALLBACK, timeout=180)
    except subprocess.TimeoutExpired as hung:
        pytest.fail(f"deadlock: the child hung\n{hung.stderr!r}")
    assert result.returncode == 0, result.stderr
    (line,) = [line for line in result.stdout.splitlines() if line.startswith("done ")]
    _, calls, kinds, threads = line.split(" ")
    assert int(calls) > 0
    assert {"munmap", "madvise"} <= set(kinds.split(","))
    assert "pmca-release-listener" in threads.split(",") or "MainThread" in threads.split(",")


def test_unregister_is_idempotent() -> None:
    recorder = Recorder()
    with pmca.Session(frameworks=["memory"]):
        handle = pmca.memory.register_release(recorder)
        states = [handle.active]
        assert pmca.native.dispatcher().subscriber_count == 1
        handle.unregister()
        # Whatever was released while it was registered (a Python arena freed
        # by another thread, say) has been delivered by now; the kernel may
        # hand that very range to the mmap below, so only what arrives from
        # here on can tell whether the callback is still called.
        delivered_while_registered = len(recorder.events)
        handle.unregister()
        states.append(handle.active)
        assert states == [True, False]
        assert pmca.native.dispatcher().subscriber_count == 0
        region = mmap.mmap(-1, 1 << 20)
        region.close()
        pmca.memory.drain()
        handle.unregister()
    assert recorder.events[delivered_while_registered:] == []


def test_duplicate_registration_is_rejected() -> None:
    recorder = Recorder()
    with pmca.Session(frameworks=["memory"]):
        handle = pmca.memory.register_release(recorder)
        with pytest.raises(ValueError, match="already registered"):
            pmca.memory.register_release(recorder)
        assert pmca.native.dispatcher().subscriber_count == 1
        handle.unregister()
        again = pmca.memory.register_release(recorder)  # allowed once unregistered
        again.unregister()


@MODES
def test_handles_are_dropped_when_the_memory_framework_closes(mode: str) -> None:
    first, second = Recorder(), Recorder()
    with pmca.Session(mca={"mca_base_component_dso": mode}, frameworks=["memory"]):
        with pmca.Session(frameworks=["memory"]):
            handles = [pmca.memory.register_release(r) for r in (first, second)]
        # The inner finalize dropped a reference, not the framework.
        assert all(handle.active for handle in handles)
        assert pmca.native.dispatcher().subscriber_count == 2
    assert not any(handle.active for handle in handles)
    assert pmca.native.dispatcher().subscriber_count == 0
    assert not pmca.native.dispatcher().listening
    for handle in handles:
        handle.unregister()  # still harmless after the close
    with pytest.raises(pmca.memory.MemoryHooksUnavailable, match="no pmca session"):
        pmca.memory.register_release(first)


@pytest.mark.filterwarnings("ignore::RuntimeWarning")
def test_a_failing_callback_does_not_stop_the_others() -> None:
    recorder = Recorder()
    failures: list[str] = []

    def broken(address: int, length: int, kind: str, from_alloc: bool) -> None:
        failures.append(threading.current_thread().name)
        raise RuntimeError("callback bug")

    with pmca.Session(frameworks=["memory"]):
        handles = [pmca.memory.register_release(cb) for cb in (broken, recorder)]
        addresses = []
        for _ in range(2):  # the second round proves delivery survived the first failure
            region = mmap.mmap(-1, 1 << 20)
            addresses.append(mapped_address(region))
            region.close()
            pmca.memory.drain()
        for handle in handles:
            handle.unregister()
    assert failures
    for address in addresses:
        assert recorder.covering(address, 1 << 20, "munmap")
