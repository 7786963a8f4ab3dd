"""Short locks made fresh in a child after ``fork()``.

``fork()`` copies only the calling thread: a lock another thread held at that
moment stays held forever in the child, and the child's first pmca call
deadlocks. Locks guarding short, self-contained critical sections (never
held while calling out or taking another lock, never held across a fork)
are simply made fresh in the child, as CPython does for its own. The
runtime lock is different: it is held across whole lifecycle transitions,
so the runtime takes it before every fork instead (see
``pmca.runtime._runtime``), and the child sees no transition half-done.
"""

from __future__ import annotations

import os
import threading
import weakref
from typing import Protocol, TypeVar, cast


class _Reinitializable(Protocol):
    def _at_fork_reinit(self) -> None: ...


_L = TypeVar("_L")

_short_locks: weakref.WeakSet[object] = weakref.WeakSet()


def fresh_after_fork(lock: _L) -> _L:
    """Register a ``threading.Lock``/``RLock`` to be made fresh in fork children."""
    _short_locks.add(lock)
    return lock


def short_lock() -> threading.Lock:
    """A new lock that is fresh (unlocked) in every fork child."""
    return fresh_after_fork(threading.Lock())


def _reinit_in_child() -> None:
    for lock in list(_short_locks):
        cast(_Reinitializable, lock)._at_fork_reinit()


os.register_at_fork(after_in_child=_reinit_in_child)

__all__ = ["fresh_after_fork", "short_lock"]
