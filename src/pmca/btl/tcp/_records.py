"""What a connection queues to write and where a bulk body it reads goes."""

from __future__ import annotations

import ctypes
from collections.abc import Callable

from attrs import define

from ..._records import Record
from .._interface import Completion


@define(eq=False, repr=False)
class Outgoing(Record):
    buffers: list[memoryview]
    callback: Completion | None
    zerocopy: bool = False
    #: An active message's tag (-1: another kind of frame), size and a buffer
    #: that starts with it, for :meth:`Connection.queued_sends`.
    tag: int = -1
    size: int = 0
    head: memoryview | bytes = b""
    #: What the connection's own copy of it counts against the queue limit.
    owned: int = 0
    #: Whether the socket took a part of it (then it cannot be taken back).
    started: bool = False


@define(eq=False, repr=False)
class Sink(Record):
    """Where a bulk body goes: ``target[done:]`` still to fill."""

    target: memoryview
    done: int
    finished: Callable[[], None]
    #: Told why, when the connection ends before ``target`` is full.
    abandoned: Completion | None = None
    #: ``target``'s first byte, pinned while the native reader fills it (None: not yet).
    pin: ctypes.c_char | None = None

    def address(self) -> int:
        """The address of ``target[done]`` (``target`` pinned from the first call)."""
        if self.pin is None:
            self.pin = ctypes.c_char.from_buffer(self.target)
        return ctypes.addressof(self.pin) + self.done


__all__ = ["Outgoing", "Sink"]
