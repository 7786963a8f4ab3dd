"""pmca's native memory-hook backend.

libc's ``munmap``, ``madvise``, ``mremap``, ``brk``, ``shmdt`` and
``mmap(MAP_FIXED)`` are patched in place (an atomic 2-byte jump at the
function entry) to hooks in ``libpmca_hooks.so`` that make the system call
and push ``{kind, address, length}`` into a lock-free ring.  Python drains
the ring and fans events out to subscribers (:func:`dispatcher`), from a
listener thread or synchronously; never from inside the hook.

Documented blind spots: ``dlclose`` (ld.so unmaps with its private
``munmap``), raw ``syscall(SYS_munmap)`` from other runtimes,
``fallocate(PUNCH_HOLE)``, ``process_madvise`` and other processes
shrinking shared memory.  :func:`coverage` measures them on this machine.
"""

from __future__ import annotations

from ._backend import HookBackend, PatchSite, available, backend, unavailable_reason
from ._coverage import Coverage, PathResult, coverage
from ._dispatch import ReleaseCallback, ReleaseDispatcher, Subscription, dispatcher
from ._errors import NativeUnavailable, PatchRefused
from ._events import (
    END_OF_MEMORY,
    OVERFLOW_EVENT,
    OVERFLOW_KIND,
    Drained,
    ReleaseEvent,
    ReleaseKind,
)
from ._selftest import self_test

__all__ = [
    "END_OF_MEMORY",
    "OVERFLOW_EVENT",
    "OVERFLOW_KIND",
    "Coverage",
    "Drained",
    "HookBackend",
    "NativeUnavailable",
    "PatchRefused",
    "PatchSite",
    "PathResult",
    "ReleaseCallback",
    "ReleaseDispatcher",
    "ReleaseEvent",
    "ReleaseKind",
    "Subscription",
    "available",
    "backend",
    "coverage",
    "dispatcher",
    "self_test",
    "unavailable_reason",
]
