"""pmca's native memory-hook backend.

libc's ``munmap``, ``madvise``, ``mremap``, ``brk``, ``shmdt`` and
``mmap(MAP_FIXED)`` are patched in place (an atomic 2-byte jump at the
function entry) to hooks in ``libpmca_hooks.so`` that make the system call
after pushing ``{kind, address, length}`` into a lock-free ring.  Python
drains the ring and fans events out to subscribers (:func:`dispatcher`),
from a listener thread or synchronously; never from inside the hook.
:func:`stats` counts what was published, delivered, dropped.

Documented blind spots: ``dlclose`` (ld.so unmaps with its private
``munmap``), raw ``syscall(SYS_munmap)`` from other runtimes,
``fallocate(PUNCH_HOLE)``, ``process_madvise`` and other processes
shrinking shared memory.  :func:`coverage` measures them on this machine.
"""

from __future__ import annotations

from ._backend import (
    HookBackend,
    PatchSite,
    Pulled,
    RingState,
    available,
    backend,
    unavailable_reason,
)
from ._coverage import Coverage, PathResult, coverage
from ._dispatch import (
    BatchCallback,
    HealthCheck,
    ReleaseCallback,
    ReleaseDispatcher,
    Subscription,
    dispatcher,
)
from ._errors import NativeUnavailable, PatchRefused
from ._events import (
    END_OF_MEMORY,
    KIND_NAMES,
    OVERFLOW_EVENT,
    OVERFLOW_KIND,
    Drained,
    ReleaseBatch,
    ReleaseEvent,
    ReleaseKind,
)
from ._selftest import self_test
from ._stats import DeliveryStats, stats

__all__ = [
    "END_OF_MEMORY",
    "KIND_NAMES",
    "OVERFLOW_EVENT",
    "OVERFLOW_KIND",
    "BatchCallback",
    "Coverage",
    "DeliveryStats",
    "Drained",
    "HealthCheck",
    "HookBackend",
    "NativeUnavailable",
    "PatchRefused",
    "PatchSite",
    "PathResult",
    "Pulled",
    "ReleaseBatch",
    "ReleaseCallback",
    "ReleaseDispatcher",
    "ReleaseEvent",
    "ReleaseKind",
    "RingState",
    "Subscription",
    "available",
    "backend",
    "coverage",
    "dispatcher",
    "self_test",
    "stats",
    "unavailable_reason",
]
