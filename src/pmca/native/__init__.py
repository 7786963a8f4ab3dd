"""pmca's native memory-hook backend.

libc's ``munmap``, ``madvise``, ``mremap``, ``brk``, ``shmdt`` and
``mmap(MAP_FIXED)`` are patched in place (an atomic 2-byte jump at the
function entry) to hooks in ``libpmca_hooks.so`` that make the system call
after pushing ``{kind, address, length}`` into a lock-free ring.  Python
drains the ring and fans events out to subscribers (:func:`dispatcher`),
from a listener thread or synchronously; never from inside the hook.
:func:`stats` counts what was published, delivered, dropped.

Inside an MPI job UCX's ucm usually owns those entries: pmca then subscribes
to ucm's ``VM_UNMAPPED`` events (:func:`ucm_source`) with a handler that
pushes into the same ring, and :func:`check_overwrites` (run at every drain)
notices when someone writes over the hooks pmca relies on.

Documented blind spots: ``dlclose`` (ld.so unmaps with its private
``munmap``), raw ``syscall(SYS_munmap)`` from other runtimes,
``fallocate(PUNCH_HOLE)``, ``process_madvise`` and other processes
shrinking shared memory.  :func:`coverage` measures them on this machine.
"""

from __future__ import annotations

from .._lazy import lazy_attributes

#: ``typing.TYPE_CHECKING`` without importing typing (mypy goes by the name).
TYPE_CHECKING = False
if TYPE_CHECKING:
    from ._backend import (
        HookBackend,
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
        UCM_KIND,
        Drained,
        ReleaseBatch,
        ReleaseEvent,
        ReleaseKind,
    )
    from ._foreign import ForeignPatch, foreign_patches
    from ._selftest import self_test
    from ._sites import PatchSite
    from ._stats import DeliveryStats, stats
    from ._ucm import UcmSource, ucm_source
    from ._ucm_status import UcmStatus
    from ._watch import (
        Overwrite,
        check_address,
        check_overwrites,
        on_overwrite,
        overwrites_detected,
        overwrites_found,
    )

# Every name is imported at first use: a session imports the backend and the
# pieces its components call, not the dispatcher, the overwrite watch or the
# measurements (``pmca doctor``, the tests) unless something uses them.
_MODULES = {
    "._backend": "HookBackend Pulled RingState available backend unavailable_reason",
    "._coverage": "Coverage PathResult coverage",
    "._dispatch": (
        "BatchCallback HealthCheck ReleaseCallback ReleaseDispatcher Subscription dispatcher"
    ),
    "._errors": "NativeUnavailable PatchRefused",
    "._events": (
        "END_OF_MEMORY KIND_NAMES OVERFLOW_EVENT OVERFLOW_KIND UCM_KIND Drained "
        "ReleaseBatch ReleaseEvent ReleaseKind"
    ),
    "._foreign": "ForeignPatch foreign_patches",
    "._selftest": "self_test",
    "._sites": "PatchSite",
    "._stats": "DeliveryStats stats",
    "._ucm": "UcmSource ucm_source",
    "._ucm_status": "UcmStatus",
    "._watch": (
        "Overwrite check_address check_overwrites on_overwrite overwrites_detected overwrites_found"
    ),
}
_TARGETS = {
    name: f"{module}:{name}" for module, names in _MODULES.items() for name in names.split()
}
if not TYPE_CHECKING:  # mypy sees the imports above, and no catch-all
    __getattr__, __dir__ = lazy_attributes(__name__, _TARGETS)

__all__ = [
    "END_OF_MEMORY",
    "KIND_NAMES",
    "OVERFLOW_EVENT",
    "OVERFLOW_KIND",
    "UCM_KIND",
    "BatchCallback",
    "Coverage",
    "DeliveryStats",
    "Drained",
    "ForeignPatch",
    "HealthCheck",
    "HookBackend",
    "NativeUnavailable",
    "Overwrite",
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
    "UcmSource",
    "UcmStatus",
    "available",
    "backend",
    "check_address",
    "check_overwrites",
    "coverage",
    "dispatcher",
    "foreign_patches",
    "on_overwrite",
    "overwrites_detected",
    "overwrites_found",
    "self_test",
    "stats",
    "ucm_source",
    "unavailable_reason",
]
