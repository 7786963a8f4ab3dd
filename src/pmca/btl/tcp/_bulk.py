"""A tcp connection's bulk bodies: received straight into their destination.

A bulk body (get data, put data, a large active message) is routed when its
frame header is parsed: into the buffer its owner names (a posted receive's,
a registered region), into a buffer of its own when nobody places it, or piece
by piece into one scratch buffer when it is refused. What the connection's
buffer already holds of it is copied; the rest is read from the socket into
place, natively (one call per piece, pipelined with the sender's writes) or,
for a short rest or a paced read, from Python.
"""

from __future__ import annotations

import errno
import os
import select
import socket
from collections.abc import Callable
from typing import TYPE_CHECKING, cast

from .._interface import PLACEMENT_HEAD
from ..base._pvars import NATIVE_RECEIVED, STREAMS_PLACED, STREAMS_STAGED
from ..bml._spin import SLICE, Spinner
from . import _wire as wire
from ._records import Sink

if TYPE_CHECKING:
    from ._connection import Connection, ConnectionOwner

#: Unready polls of a paced bulk read before reading whatever is there anyway
#: (a guard against a kernel that never reports the low-water mark reached).
_PACING_PATIENCE = 256
#: Active messages with a longer body are streamed (placed, or received into
#: their own buffer) instead of being parsed out of the connection's buffer.
STREAM_MIN = 64 * 1024
#: Longest native read or write of a bulk body in one go while it moves: what
#: the other connections of the rail may wait for progress meanwhile.
STREAM_MOST = 4 * SLICE
#: Bytes of a refused put's data received at once, to be dropped.
_DISCARD_PIECE = 256 * 1024


class BulkReceiver:
    """The bulk-body half of :class:`~pmca.btl.tcp._connection.Connection`
    (which sets every attribute declared here)."""

    module: ConnectionOwner
    sock: socket.socket
    fd: int
    traffic: list[int]
    view: memoryview
    start: int
    end: int
    closed: BaseException | None
    read_chunk: int
    bulk_idle: float
    bulk_yield: bool
    _sink: Sink | None
    _scratch: memoryview | None
    _streamer: Spinner | None
    _poller: select.poll
    _low_water: int
    _unready: int

    @property
    def rank_name(self) -> str:
        raise NotImplementedError

    def lost(self, error: BaseException) -> None:
        raise NotImplementedError

    @property
    def _connection(self) -> Connection:
        """This connection, as its owner's callbacks name it."""
        return cast("Connection", self)

    def in_bulk(self) -> bool:
        """Whether a bulk body is being received straight into its destination."""
        return self._sink is not None

    def _fill_sink(self) -> bool:
        sink = self._sink
        assert sink is not None
        if (
            self._streamer is not None
            and not self.read_chunk
            and sink.target.nbytes - sink.done > STREAM_MIN
        ):
            # a small rest (the tail of a 64 KiB message) costs less read from Python
            return self._fill_natively(sink)
        while sink.done < sink.target.nbytes:
            if self.read_chunk and not self._paced_ready(sink.target.nbytes - sink.done):
                return False
            try:
                count = self.sock.recv_into(sink.target[sink.done :])
            except (BlockingIOError, InterruptedError):
                return False
            except OSError as exc:
                self.lost(exc)
                return False
            if count == 0:
                self._closed_mid_transfer()
                return False
            sink.done += count
        self._sink_filled(sink)
        return True

    def _stream(self, address: int, length: int, write: bool) -> int:
        """One native read (or write) of ``length`` bytes at ``address`` as the peer
        makes way, with this connection's patience (see :meth:`Spinner.stream`): the
        bytes moved, or a negative errno."""
        streamer = self._streamer
        assert streamer is not None
        return streamer.stream(
            self.fd, address, length, write, self.bulk_idle, STREAM_MOST, self.bulk_yield
        )

    def _fill_natively(self, sink: Sink) -> bool:
        """One native read of the rest of ``sink`` as it arrives (see :meth:`Spinner.stream`):
        whether it is full. A body still coming after it goes on at the next progress."""
        count = self._stream(sink.address(), sink.target.nbytes - sink.done, False)
        if count > 0:
            sink.done += count
            self.traffic[NATIVE_RECEIVED] += count
            if sink.done < sink.target.nbytes:
                return False
            self._sink_filled(sink)
            return True
        if count == -errno.ECONNRESET:
            self._closed_mid_transfer()
        elif count < 0:
            self.lost(OSError(-count, os.strerror(-count)))
        return False

    def _closed_mid_transfer(self) -> None:
        self.lost(ConnectionResetError(f"{self.rank_name} closed the connection mid-transfer"))

    def _sink_filled(self, sink: Sink) -> None:
        self._sink = None
        self._set_low_water(1)
        sink.finished()

    def _paced_ready(self, remaining: int) -> bool:
        """Whether a paced bulk read should happen now (one chunk, or the rest, is waiting)."""
        self._set_low_water(min(remaining, self.read_chunk))
        if self._poller.poll(0):
            self._unready = 0
            return True
        self._unready += 1
        if self._unready < _PACING_PATIENCE:
            return False
        self._unready = 0
        return True

    def _set_low_water(self, size: int) -> None:
        if size != self._low_water and self.closed is None:
            try:
                self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVLOWAT, size)
            except OSError:
                self.read_chunk = 0  # the socket refuses pacing: read whatever arrives
                return
            self._low_water = size

    def _begin_bulk(self, kind: int, length: int, aux: int) -> None:
        """Route a bulk body: copy what is buffered, then receive the rest in place."""
        if kind == wire.PUT:
            need = wire.PUT_HEAD.size
            if length < need:
                self.lost(
                    ValueError(
                        f"{self.rank_name} sent a malformed put frame: {length} bytes, "
                        f"shorter than its {need}-byte head"
                    )
                )
                return
            if self.end - self.start < need:
                # Rare: the put head is split; wait for it with a small sink.
                head = bytearray(need)

                def got_head() -> None:
                    self._put_body(bytes(head), length - need)

                self._sink = Sink(memoryview(head), 0, got_head)
                self._copy_buffered()
                return
            head_bytes = bytes(self.view[self.start : self.start + need])
            self.start += need
            self._put_body(head_bytes, length - need)
            return
        target, finished = self.module.get_target(self._connection, aux, length)
        self._sink = Sink(target, 0, finished)
        self._copy_buffered()

    def _begin_stream(self, tag: int, length: int) -> None:
        """Route a large active message: into the place its receiver names, or its own buffer."""
        head = self.view[self.start : self.start + PLACEMENT_HEAD]
        placement = self.module.place(self._connection, tag, head, length)
        if placement is not None:
            self.module.streams_placed += 1
            self.traffic[STREAMS_PLACED] += 1
            self.start += placement.skip
            finished = placement.finished

            def landed() -> None:
                finished(None)
                self.module.landed(self._connection)  # it may have joined what the receiver holds

            self._sink = Sink(placement.target, 0, landed, finished)
        else:
            self.module.streams_staged += 1
            self.traffic[STREAMS_STAGED] += 1
            body = bytearray(length)

            def arrived() -> None:
                self.module.dispatch(self._connection, wire.AM, tag, 0, memoryview(body))

            self._sink = Sink(memoryview(body), 0, arrived)
        self._copy_buffered()

    def _put_body(self, head: bytes, length: int) -> None:
        target, finished = self.module.put_target(self._connection, head, length)
        if target is None:
            self._discard(length, finished)
            return
        self._sink = Sink(target, 0, finished)
        self._copy_buffered()

    def _discard(self, length: int, then: Callable[[], None]) -> None:
        """Receive ``length`` bytes nobody takes (a refused put's data) a piece at a
        time into one scratch buffer, never all at once (up to 4 GiB); then ``then()``."""
        piece = min(length, _DISCARD_PIECE)
        if self._scratch is None or self._scratch.nbytes < piece:
            self._scratch = memoryview(bytearray(_DISCARD_PIECE))

        def filled() -> None:
            if length > piece:
                self._discard(length - piece, then)
            else:
                then()

        self._sink = Sink(self._scratch[:piece], 0, filled)
        self._copy_buffered()

    def _copy_buffered(self) -> None:
        sink = self._sink
        assert sink is not None
        available = min(self.end - self.start, sink.target.nbytes - sink.done)
        if available:
            sink.target[sink.done : sink.done + available] = self.view[
                self.start : self.start + available
            ]
            sink.done += available
            self.start += available
        if sink.done == sink.target.nbytes:
            self._sink_filled(sink)


__all__ = ["STREAM_MIN", "STREAM_MOST", "BulkReceiver"]
