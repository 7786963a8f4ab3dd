"""Release events recorded by the callback, applied later under the cache lock.

The callback runs on whichever thread drains the memory hooks (the
listener, or a thread inside a cache operation).  It must never wait for
the cache lock: a thread holding that lock may be the one draining.  So it
only appends the range to a list under its own lock, held for a handful of
bytecodes and never while anything else is taken.  The append may allocate
(the list grows, a tuple is made) with that lock held; that cannot wait on
itself, because the callback never runs inside an allocation or a hook: the
hooks only publish to the ring, and the callback runs when a thread drains it.
"""

from __future__ import annotations

import ctypes
import threading
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from ...native import ReleaseBatch

#: Largest address + 1 (a 64-bit address space).
ADDRESS_LIMIT = 2**64 - 1


class ReleaseLog:
    """Released ranges not yet applied; too many of them, or a lost event, mean "all"."""

    def __init__(self, limit: int) -> None:
        self._lock = threading.Lock()
        self._ranges: list[tuple[int, int]] = []
        self._overflow = False
        self._limit = limit
        #: Nonzero from a record until :meth:`settle` finds everything applied: a
        #: native word the index's one-call lookup reads (nonzero: the full way).
        self.pending = ctypes.c_uint64(0)

    def record(self, address: int, length: int, kind: str, from_alloc: bool) -> None:
        """A ``pmca.memory.register_release`` callback: record, never invalidate here."""
        with self._lock:
            if self._overflow:
                return
            self.pending.value = 1
            if kind == "overflow" or len(self._ranges) >= self._limit:
                self._overflow = True
                self._ranges = []
                return
            self._ranges.append((address, min(address + length, ADDRESS_LIMIT)))

    def record_batch(self, batch: ReleaseBatch) -> None:
        """The batched form (``register_release(..., batch=True)``): one lock per batch."""
        addresses = batch.addresses.tolist()  # copies: the batch dies with the callback
        lengths = batch.lengths.tolist()
        with self._lock:
            if self._overflow:
                return
            self.pending.value = 1
            if batch.overflow or len(self._ranges) + len(addresses) > self._limit:
                self._overflow = True
                self._ranges = []
                return
            self._ranges.extend(
                (address, min(address + length, ADDRESS_LIMIT))
                for address, length in zip(addresses, lengths, strict=True)
            )

    def mark_overflow(self) -> None:
        """Something was lost (an incomplete drain): everything counts as released."""
        with self._lock:
            self.pending.value = 1
            self._overflow = True
            self._ranges = []

    def take(self) -> tuple[bool, list[tuple[int, int]]]:
        """``(overflowed, ranges)`` recorded since the last take, and forget them."""
        with self._lock:
            overflow, ranges = self._overflow, self._ranges
            self._overflow, self._ranges = False, []
        return overflow, ranges

    def settle(self) -> None:
        """What :meth:`take` returned has been applied: clear :attr:`pending`, unless
        more was recorded since (a lookup must not pass before then)."""
        with self._lock:
            if not self._ranges and not self._overflow:
                self.pending.value = 0
