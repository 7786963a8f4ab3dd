"""Seed scenario 2: the madvise self-deadlock (open-mpi/ompi#13149, ofiwg/libfabric#10879).

libfabric's registration cache inserted into its tree with ``mm_lock`` held,
and the insert called ``malloc``.  Under mimalloc, ``malloc`` decommits
pages with ``madvise(MADV_DONTNEED)``; Open MPI's patcher hook on
``madvise`` called the release callbacks right there, and libfabric's
callback (``ofi_import_monitor_notify``) took ``mm_lock`` again: a thread
waiting for a non-recursive mutex it already holds.

Both variants run the same pieces in a fresh, multi-threaded process:

- a registration cache whose index is guarded by a non-reentrant lock and
  which allocates while holding it;
- an allocator that, like mimalloc's ``_mi_prim_decommit``, calls libc's
  ``madvise(MADV_DONTNEED)`` on its spare pages before handing out memory;
- a release callback that takes the cache's lock to invalidate.

``callback inside the hook`` emulates the historical design at Python level:
the callback runs synchronously where ``madvise`` is called, with the lock
held, and the process hangs (detected by a watchdog, which dumps the stack
to prove where).  ``pmca hooks`` uses the real patched ``madvise``: the hook
only pushes the event into the ring and the callback runs later, on the
listener thread or in ``drain()``, so the insert completes.
"""

from __future__ import annotations

import threading
from collections.abc import Callable

from ._common import emit, run_child, skipped_without_native
from ._result import ScenarioResult

SCENARIO = "madvise-deadlock"

#: How many registrations each variant inserts.
INSERTS = 200
_SPARE_PAGES = 16

ReleaseCallback = Callable[[int, int, str, bool], object]


class DecommittingAllocator:
    """Hands out buffers and, like mimalloc, first decommits its spare pages with madvise."""

    def __init__(self, madvise: Callable[[int, int], object]) -> None:
        from .._libc import PAGE, libc

        self._libc = libc()
        self.spare_length = _SPARE_PAGES * PAGE
        self.spare = self._libc.map_anonymous(self.spare_length)
        self._madvise = madvise

    def allocate(self, size: int) -> bytearray:
        self._libc.touch(self.spare, self.spare_length)
        self._madvise(self.spare, self.spare_length)
        return bytearray(size)

    def close(self) -> None:
        self._libc.munmap(self.spare, self.spare_length)


class RegistrationCache:
    """A libfabric-style MR cache: an index under a non-reentrant lock (``mm_lock``)."""

    def __init__(self, allocator: DecommittingAllocator) -> None:
        self.lock = threading.Lock()
        self.entries: dict[int, tuple[int, bytearray]] = {}
        self.allocator = allocator
        self.released: list[tuple[int, int, str, str]] = []

    def insert(self, address: int, length: int) -> None:
        """``ofi_rbmap_insert``: allocates a tree node with the lock held."""
        with self.lock:
            node = self.allocator.allocate(256)
            self.entries[address] = (length, node)

    def on_release(self, address: int, length: int, kind: str, from_alloc: bool) -> None:
        """``ofi_import_monitor_notify``: invalidates overlapping entries under the lock."""
        with self.lock:
            self.released.append((address, length, kind, threading.current_thread().name))
            end = address + length
            for start in [a for a, (n, _) in self.entries.items() if a < end and address < a + n]:
                del self.entries[start]


def _madvise_dontneed(address: int, length: int) -> None:
    from .._libc import MADV_DONTNEED, libc

    if libc().madvise(address, length, MADV_DONTNEED) != 0:
        raise OSError("madvise(MADV_DONTNEED) failed")


def _hook_calls_callbacks(callbacks: list[ReleaseCallback]) -> Callable[[int, int], None]:
    """Open MPI's ``_intercept_madvise``: do the call, then run every callback right here."""

    def intercepted(address: int, length: int) -> None:
        _madvise_dontneed(address, length)
        for callback in callbacks:  # opal_mem_hooks_release_hook(buf, len, from_alloc=true)
            callback(address, length, "madvise", True)

    return intercepted


def _workload(cache: RegistrationCache, between: Callable[[], object]) -> None:
    for number in range(INSERTS):
        between()  # outside the lock, as a registration cache drains before a lookup
        cache.insert(0x10000 * (number + 1), 4096)


def _child_callback_in_hook() -> None:
    callbacks: list[ReleaseCallback] = []
    allocator = DecommittingAllocator(_hook_calls_callbacks(callbacks))
    cache = RegistrationCache(allocator)
    callbacks.append(cache.on_release)
    _workload(cache, lambda: None)  # hangs at the first insert
    emit({"inserts": len(cache.entries), "released": len(cache.released)})


def _child_pmca() -> None:
    from .. import memory
    from ..runtime import Session

    with Session():
        allocator = DecommittingAllocator(_madvise_dontneed)  # the real, patched madvise
        cache = RegistrationCache(allocator)
        handle = memory.register_release(cache.on_release)
        support = memory.support_level()
        _workload(cache, memory.drain)
        memory.drain()
        handle.unregister()
        allocator.close()
    spare = (allocator.spare, allocator.spare + allocator.spare_length)
    seen = [
        (kind, thread)
        for address, length, kind, thread in cache.released
        if kind == "madvise" and address < spare[1] and spare[0] < address + length
    ]
    emit(
        {
            "inserts": INSERTS,
            "support": int(support),
            "madvise_events": len(seen),
            "threads": sorted({thread for _, thread in seen}),
        }
    )


def _child(variant: str) -> None:
    """Entry point of a child process."""
    {"callback-in-hook": _child_callback_in_hook, "pmca": _child_pmca}[variant]()


def _stuck_in_callback(stack_dump: str) -> bool:
    """Whether a thread's innermost frames are: callback, called from madvise, inside insert."""
    frames = [line.rsplit(" in ", 1)[-1] for line in stack_dump.splitlines() if " in " in line]
    for index, frame in enumerate(frames):
        if frame == "on_release":
            below = frames[index + 1 : index + 5]
            return "intercepted" in below and "insert" in below
    return False


_REPRODUCTION = "callback inside the hook"


def _reproduction(timeout: float) -> ScenarioResult:
    variant = _REPRODUCTION
    child = run_child(__name__, "_child", "callback-in-hook", hang_after=timeout)
    if child.hung and _stuck_in_callback(child.stderr):
        return ScenarioResult(
            SCENARIO,
            variant,
            "reproduced",
            "self-deadlock: insert holds the lock -> allocate -> madvise -> callback -> "
            "waits for that same lock (stack dumped by the watchdog)",
        )
    if child.completed:
        return ScenarioResult(
            SCENARIO, variant, "failed", "completed: the emulated historical design did not hang"
        )
    return ScenarioResult(SCENARIO, variant, "failed", child.describe_failure())


def _prevention(timeout: float) -> ScenarioResult:
    variant = "pmca hooks (ring + listener)"
    child = run_child(__name__, "_child", "pmca", hang_after=timeout)
    if not child.completed or child.payload is None:
        return ScenarioResult(SCENARIO, variant, "failed", child.describe_failure())
    events = int(child.payload["madvise_events"])
    if events == 0:
        return ScenarioResult(
            SCENARIO,
            variant,
            "failed",
            "completed, but no madvise event reached the callback: the hook did not fire",
        )
    threads = ", ".join(child.payload["threads"])
    return ScenarioResult(
        SCENARIO,
        variant,
        "prevented",
        f"{child.payload['inserts']} inserts with the lock held completed; "
        f"{events} madvise events delivered later (threads: {threads})",
    )


def run(*, timeout: float = 5.0, reproduce: bool = True) -> list[ScenarioResult]:
    """Run both variants; ``timeout`` is how long a child may take before it counts as hung.

    The reproduction always costs the full ``timeout`` (it is detected by
    hanging); ``reproduce=False`` skips it.
    """
    skipped = skipped_without_native(SCENARIO)
    if skipped is not None:
        return skipped
    first = (
        _reproduction(timeout)
        if reproduce
        else ScenarioResult(SCENARIO, _REPRODUCTION, "skipped", "not run (quick)")
    )
    return [first, _prevention(timeout)]
