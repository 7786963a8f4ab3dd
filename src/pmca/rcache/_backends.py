"""A backend for transports that need no pinning."""

from __future__ import annotations

import threading

from attrs import frozen

from .._public import public
from .._records import FrozenValue


@public
@frozen(eq=False, repr=False)
class UnpinnedHandle(FrozenValue):
    """The handle :class:`UnpinnedBackend` returns: just the range."""

    base: int
    size: int


@public
class UnpinnedBackend:
    """Registers nothing with anyone; counts what it was asked.

    For transports that copy (shared memory with ``process_vm_readv``, plain
    sockets) but still want the cache's bookkeeping, and for tests.
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.registered = 0
        self.deregistered = 0

    def register(self, base: int, size: int) -> UnpinnedHandle:
        with self._lock:
            self.registered += 1
        return UnpinnedHandle(base, size)

    def deregister(self, handle: UnpinnedHandle) -> None:
        with self._lock:
            self.deregistered += 1

    @property
    def live(self) -> int:
        """Registrations not yet deregistered."""
        with self._lock:
            return self.registered - self.deregistered
