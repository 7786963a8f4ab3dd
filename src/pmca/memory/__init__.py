"""The memory framework and the memory-hooks API.

Release callbacks receive ``(address, length, kind, from_alloc)`` and are
called from Python (a listener thread, or whoever calls :func:`drain`),
never from inside the native hook, so they may allocate, free and take
locks.
"""

from __future__ import annotations

from ._base import (
    BatchCallback,
    MemoryBase,
    MemoryHooksUnavailable,
    ReleaseCallback,
    ReleaseHandle,
)
from ._framework import FRAMEWORK
from ._interface import MemoryModule, Support

FREE = Support.FREE
MUNMAP = Support.MUNMAP
CHUNK = Support.CHUNK


def _base() -> MemoryBase | None:
    from ..runtime import RUNTIME

    state = RUNTIME.frameworks.get(FRAMEWORK.name)
    base = state.base if state is not None else None
    return base if isinstance(base, MemoryBase) else None


def support_level() -> Support:
    """What the memory hooks catch now; ``Support.NONE`` with no memory framework open."""
    base = _base()
    return base.support_level() if base is not None else Support.NONE


def register_release(
    callback: ReleaseCallback | BatchCallback, *, batch: bool = False
) -> ReleaseHandle:
    """Call ``callback(address, length, kind, from_alloc)`` for every release.

    With ``batch=True``, ``callback(batch)`` receives a
    :class:`pmca.native.ReleaseBatch` of records at a time (columns as
    memoryviews, no Python object per event; ``batch.overflow`` means "treat
    everything as released").  Only releases that happen after this call are
    delivered.  Callbacks of one registration never run concurrently; they
    must not block on a lock that is held around :func:`drain` (collect the
    ranges, apply them after ``drain()`` returns).

    Installs the hooks first when the leave_pinned matrix says "runtime".
    Raises :class:`MemoryHooksUnavailable` when no hooks can be had, naming
    why. When it raises (``KeyboardInterrupt`` included), nothing stays
    registered.
    """
    made: list[ReleaseHandle] = []
    try:
        _register_release(callback, batch, made)
    except BaseException:
        for handle in made:  # the caller never got it: undo (the hooks stay)
            handle.unregister()
        raise
    return made[0]


def _register_release(
    callback: ReleaseCallback | BatchCallback, batch: bool, made: list[ReleaseHandle]
) -> None:
    from .. import native
    from .._interrupts import deferred_interrupts
    from ..runtime import RUNTIME

    # One transition: hooks, subscription and handle all exist, or none does.
    with RUNTIME.lock, deferred_interrupts():
        base = _base()
        if base is None:
            raise MemoryHooksUnavailable(
                "no pmca session has the memory framework open; release callbacks need one"
            )
        if any(handle.callback is callback for handle in base.handles):
            raise ValueError(f"release callback {callback!r} is already registered")
        base.activate_for_release()
        subscription = native.dispatcher().subscribe(callback, batch=batch)

        def unsubscribe() -> None:
            subscription.unregister()
            if handle in base.handles:
                base.handles.remove(handle)

        handle = ReleaseHandle(callback, unsubscribe)
        made.append(handle)
        base.handles.append(handle)


def drain() -> int:
    """Deliver every release that happened before this call to every callback.

    Returns how many events it took from the native ring.  When it returns,
    each callback has seen each of those releases, or an overflow notice.
    """
    from .. import native

    if not native.available():
        return 0
    return native.dispatcher().drain()


__all__ = [
    "CHUNK",
    "FRAMEWORK",
    "FREE",
    "MUNMAP",
    "BatchCallback",
    "MemoryHooksUnavailable",
    "MemoryModule",
    "ReleaseCallback",
    "ReleaseHandle",
    "Support",
    "drain",
    "register_release",
    "support_level",
]
