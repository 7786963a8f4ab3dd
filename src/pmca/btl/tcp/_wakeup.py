"""What a waiting rank sleeps on while a rail has output queued.

The progress engine sleeps on descriptors that become *readable*
(``wait_fds``). A connection whose socket is full waits to become
*writable*, which reading its descriptor never shows; so a rail with output
queued used to ask to be polled, and a blocked ``send`` polled and yielded
the CPU in a loop, a whole core for as long as its peer did not read. An
epoll set becomes readable when any descriptor in it is ready as asked:
each connection is in it for input, and for room to write while it has
output queued, and the engine sleeps on the set's one descriptor like on
any other (its ``select`` releases the GIL).
"""

from __future__ import annotations

import contextlib
import select
from collections.abc import Iterable
from typing import Protocol


class Watched(Protocol):
    """What :class:`Wakeup` reads of a connection."""

    fd: int
    #: Not read now (flow control): armed for room to write only.
    paused: bool

    @property
    def queue(self) -> object: ...


class Wakeup:
    """One rail's epoll set: its connections, for input, and for output while queued."""

    def __init__(self) -> None:
        self._epoll: select.epoll | None = None
        #: What the set holds: each connection's descriptor and events.
        self._armed: dict[Watched, tuple[int, int]] = {}

    def arm(self, connections: Iterable[Watched]) -> int:
        """Bring the set up to date with ``connections``; its descriptor."""
        if self._epoll is None:
            self._epoll = select.epoll()
        epoll = self._epoll
        wanted = {
            c: (c.fd, (0 if c.paused else select.EPOLLIN) | (select.EPOLLOUT if c.queue else 0))
            for c in connections
            if c.queue or not c.paused
        }
        for connection, (fd, _) in self._armed.items():
            if connection not in wanted:
                with contextlib.suppress(OSError):  # closed: the kernel took it out
                    epoll.unregister(fd)
        for connection, (fd, events) in wanted.items():
            armed = self._armed.get(connection)
            if armed is None:
                epoll.register(fd, events)
            elif armed[1] != events:
                epoll.modify(fd, events)
        self._armed = wanted
        return epoll.fileno()

    def close(self) -> None:
        if self._epoll is not None:
            self._epoll.close()
            self._epoll = None
        self._armed = {}


__all__ = ["Wakeup"]
