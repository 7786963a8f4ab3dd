"""One rail's progress: which connections to read, write or reap, and which went silent.

A poll that finds nothing is most of a waiting rank's time, so it costs one
``poll(2)`` over every connection: reading a socket with nothing in it
raises ``BlockingIOError`` from ``recv_into``, several times the price of
asking first. A connection is read only when the kernel reports input (or
an error or hang-up, which ``poll`` always reports), except while a bulk
body streams into its destination: a paced read raises the socket's
low-water mark, and the connection decides itself when to read
(``_connection``), and while frames read already wait to be parsed (a
dispatch raised before them). Connections with queued output or zero-copy
sends in flight are written and reaped on every poll, as before.

The silence check (see ``_silence``) runs at most every
:data:`SILENCE_EVERY` seconds of wall time: one clock read per poll, the
``TCP_INFO`` reads only when due.
"""

from __future__ import annotations

import errno
import os
import select
import socket
import time
from typing import TYPE_CHECKING

from ._silence import unacknowledged_silence

if TYPE_CHECKING:
    from ._connection import Connection
    from ._wakeup import Wakeup

#: Seconds between two silence checks of a rail's connections.
SILENCE_EVERY = 0.25
_monotonic = time.monotonic


class Polling:
    """The open connections of one rail, as its progress visits them."""

    def __init__(self, keepalive: tuple[int, ...] | None) -> None:
        self._poll = select.poll()
        self._by_fd: dict[int, Connection] = {}
        #: Every connection still polled, in the order they were added, and their sockets.
        self.connections: tuple[Connection, ...] = ()
        self._fds: list[int] = []
        #: ``btl_tcp_keepalive_time + _interval * _probes`` (None: no keepalive).
        self._bound: int | None = None
        if keepalive is not None:
            idle, interval, probes = keepalive
            self._bound = idle + interval * probes
        self._silence_due = 0.0

    def add(self, connection: Connection) -> None:
        self._poll.register(connection.fd, select.POLLIN)
        self._by_fd[connection.fd] = connection
        self.connections = (*self.connections, connection)
        self._note_fds()

    def remove(self, connection: Connection) -> None:
        """Stop polling ``connection`` (closed or lost; its descriptor may be reused)."""
        if self._by_fd.get(connection.fd) is connection:
            del self._by_fd[connection.fd]
            if not connection.paused:
                self._poll.unregister(connection.fd)
        self.connections = tuple(c for c in self.connections if c is not connection)
        self._note_fds()

    def pause(self, connection: Connection) -> None:
        """Stop polling ``connection`` for input (``_flow``; already marked paused)."""
        if self._by_fd.get(connection.fd) is connection:
            self._poll.unregister(connection.fd)
        self._note_fds()

    def resume(self, connection: Connection) -> None:
        """Poll ``connection`` for input again (no longer marked paused)."""
        if self._by_fd.get(connection.fd) is connection:
            self._poll.register(connection.fd, select.POLLIN)
        self._note_fds()

    def _note_fds(self) -> None:
        # a paused socket stays readable: polled, every wait would wake at once
        self._fds = [c.fd for c in self.connections if not c.paused]

    def progress(self) -> int:
        """Read what arrived, write what waits, reap zero-copy notices; return work done."""
        if not self.connections:
            return 0  # a rail no peer is reached through (or all its peers gone)
        return self._visit([fd for fd, _events in self._poll.poll(0)])

    def progress_ready(self, ready: list[int]) -> int:
        """:meth:`progress`, reading only the sockets in ``ready`` (and bulk bodies).

        ``ready`` is what a spinning wait's native poll just found readable
        (see ``pmca.btl.bml._spin``), descriptors of other modules included:
        asking the kernel again would cost a system call per message to hear
        the same answer. A socket another thread emptied since is read once
        for nothing; input that came after that poll is found by the next.
        """
        if not self.connections:
            return 0
        return self._visit(ready)

    def _visit(self, readable: list[int]) -> int:
        if self._bound is not None and _monotonic() >= self._silence_due:
            self._check_silence()
        done = 0
        by_fd = self._by_fd
        for fd in readable:
            connection = by_fd.get(fd)
            if connection is not None and connection.closed is None and not connection.in_bulk():
                done += connection.receive()
        for connection in self.connections:
            if connection.closed is not None:
                continue
            if connection.in_bulk() or connection.frames_waiting:
                done += connection.receive()
            if connection.queue:
                done += connection.flush()
            if connection.zerocopy.pending:
                connection.reap_zerocopy()
        return done

    def check_failed(self, connection: Connection) -> None:
        """Fail ``connection`` if its socket reports an error, or (when due) its peer
        host stopped acknowledging: for waits that do not progress (no read)."""
        try:
            error = connection.sock.getsockopt(socket.SOL_SOCKET, socket.SO_ERROR)
        except OSError as exc:
            connection.lost(exc)
            return
        if error:
            connection.lost(OSError(error, os.strerror(error)))
        elif self._bound is not None and _monotonic() >= self._silence_due:
            self._check_silence()

    def _check_silence(self) -> None:
        """Fail connections whose peer host stopped acknowledging data (see ``_silence``)."""
        bound = self._bound
        assert bound is not None
        self._silence_due = _monotonic() + SILENCE_EVERY
        for connection in self.connections:
            if connection.closed is not None:
                continue
            silent = unacknowledged_silence(connection.sock)
            if silent is not None and silent > bound:
                connection.lost(
                    TimeoutError(
                        errno.ETIMEDOUT,
                        f"no acknowledgement for {silent:.1f} s of data sent (bound: "
                        f"btl_tcp_keepalive_time + _interval * _probes = {bound} s)",
                    )
                )

    def wait_fds(self, wakeup: Wakeup | None) -> list[int] | None:
        """What to sleep on, or ``None`` while some connection must be polled.

        With output queued, ``wakeup``'s descriptor (armed for input and room to
        write, see ``_wakeup``); without a ``wakeup``, ``None`` then.
        """
        fds = self.spin_fds()
        if fds is not None:
            return fds.copy()
        if wakeup is None or any(
            c.closed is None and (c.in_bulk() or c.frames_waiting) for c in self.connections
        ):
            return None  # a bulk body streams, or frames wait unparsed: keep polling
        # output queued: a readable socket does not show room to write
        return [wakeup.arm([c for c in self.connections if c.closed is None])]

    def spin_fds(self) -> list[int] | None:
        """The sockets to poll while every connection is idle (not to be changed), else
        ``None``: a bulk body streams or output is queued (progress has work).

        Asked at every idle turn of a spinning wait: the list is kept, not made
        from the connections.
        """
        for connection in self.connections:
            if connection.closed is None and (
                connection.queue or connection.in_bulk() or connection.frames_waiting
            ):
                return None
        return self._fds


__all__ = ["SILENCE_EVERY", "Polling"]
