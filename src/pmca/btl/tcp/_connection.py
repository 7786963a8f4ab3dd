"""One tcp connection to one peer: a send queue and a receive state machine.

Receiving reads what the socket has, up to a frame and a bit more
(``_READ_AHEAD``), into one buffer and parses every complete frame from it,
so a burst of small messages costs one system call. Bulk bodies (get data,
put data) go straight from the socket into their destination with
``recv_into`` once the buffered part (at most that read-ahead) is copied: a
large transfer is never staged. So does a large active message whose receiver
places it (:data:`pmca.btl.Placer`: p2p places an eager message that matches
a posted receive into that receive's buffer); one nobody places is received
into a buffer of its own and delivered whole.

Bulk bodies may be paced by ``btl_tcp_bulk_chunk`` (0, the default, does
not pace). Paced, the sender writes at most that much per system call, and
on loopback the receiver reads only once that much is waiting
(``SO_RCVLOWAT``, checked with a ``poll`` that takes no socket lock); across
a network the receiver reads as data comes: a low water mark there would
hold the window shut between reads. Measured on loopback, pacing made
1 MiB and 4 MiB ping-pongs slower, not faster (the cut writes most), hence
the default.
"""

from __future__ import annotations

import contextlib
import ctypes
import errno
import os
import select
import socket
from collections import deque
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Protocol

from .._interface import PLACEMENT_HEAD, BtlError, PeerFailed, QueuedSend
from ..base._pvars import NATIVE_SENT, SLOTS
from ..bml._spin import spinner
from . import _wire as wire
from ._bulk import STREAM_MIN, BulkReceiver
from ._records import Outgoing, Sink
from ._writes import _first_bytes
from ._zerocopy import MSG_ZEROCOPY, ZeroCopy

if TYPE_CHECKING:
    from .._interface import Limits, Placement


class ConnectionOwner(Protocol):
    """What a connection needs of its module (:class:`TcpModule`): where what
    arrives goes, and its counters of large messages placed or staged."""

    limits: Limits
    streams_placed: int
    streams_staged: int

    def dispatch(
        self, connection: Connection, kind: int, tag: int, aux: int, body: memoryview
    ) -> None: ...

    def place(
        self, connection: Connection, tag: int, head: memoryview, length: int
    ) -> Placement | None: ...

    def get_target(
        self, connection: Connection, request: int, length: int
    ) -> tuple[memoryview, Callable[[], None]]: ...

    def put_target(
        self, connection: Connection, head: bytes, length: int
    ) -> tuple[memoryview | None, Callable[[], None]]: ...

    def connection_lost(self, connection: Connection, failure: PeerFailed) -> None: ...

    def landed(self, connection: Connection) -> None: ...


_BUFFER_SIZE = 1 << 20
#: Most bytes one read between bulk bodies takes into the connection's buffer:
#: a whole parsed frame (header and a body of up to ``STREAM_MIN``), or a burst
#: of small ones. A read as large as the buffer would take most of a large
#: body that follows a header there too, to be copied a second time into
#: its destination; capped, at most this much of it is.
_READ_AHEAD = STREAM_MIN + wire.FRAME.size
#: What one copied message costs beyond its bytes, counted against the queue
#: limit (its queue entry, views and frame header: about 880 bytes measured
#: with tracemalloc on CPython 3.11): a flood of tiny sends is bounded in
#: memory too, not only in payload.
QUEUED_COST = 1024


class Connection(BulkReceiver):
    """The byte stream to one peer."""

    def __init__(
        self,
        module: ConnectionOwner,
        rank: int,
        sock: socket.socket,
        *,
        zerocopy: bool,
        host: str = "",
        zerocopy_adaptive: bool = False,
        bulk_chunk: int = 0,
        pace_reads: bool = False,
        queue_limit: int = 0,
        traffic: list[int] | None = None,
    ) -> None:
        self.module = module
        #: The peer's counters (the module's list for this rank, see
        #: ``pmca.btl.base._pvars``): the module counts on it where it sends
        #: and dispatches, this connection where it places or stages.
        self.traffic = [0] * SLOTS if traffic is None else traffic
        self.rank = rank
        self.host = host
        self.sock = sock
        sock.setblocking(False)
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.fd = sock.fileno()
        self.queue: deque[Outgoing] = deque()
        #: What the connection's own copies in ``queue`` count, and their bound
        #: (``btl_tcp_send_queue_limit``): the module copies a message only while
        #: it fits, so a peer that stops reading holds back its senders instead.
        self.owned = 0
        self.queue_limit = queue_limit
        #: Bytes read and not yet acted on: ``buffer[start:end]`` (a lane reads them too).
        self.buffer = bytearray(_BUFFER_SIZE)
        self.view = memoryview(self.buffer)
        self.start = 0
        self.end = 0
        #: Whether the last :meth:`read` took everything the socket had.
        self.drained = False
        self._sink: Sink | None = None
        #: Where a refused put's data goes, piece by piece (made at the first).
        self._scratch: memoryview | None = None
        #: Set while frames are parsed: a dispatch that raised left it set, and
        #: the frames after that one wait in the buffer with no input to tell
        #: a poll (progress parses them; a wait does not sleep on this socket).
        self.frames_waiting = False
        self.closed: BaseException | None = None
        #: Not read while set (``_flow``): the receiver holds enough of this peer's
        #: messages; already-read active messages wait in the buffer too.
        self.paused = False
        #: Times reading stopped so.
        self.pauses = 0
        #: Set when :meth:`drop_queued` cut a frame: nothing more is written.
        self.writes_ended = False
        self.zerocopy = ZeroCopy(sock, wanted=zerocopy, adaptive=zerocopy_adaptive)
        self.bulk_chunk = bulk_chunk
        #: The longest frame one write may carry (what ``_first_bytes`` lets through).
        self.write_max = bulk_chunk + (bulk_chunk >> 2) if bulk_chunk else 1 << 62
        #: Low-water mark of a paced bulk read (0: read whatever arrived).
        self.read_chunk = bulk_chunk if pace_reads else 0
        self._poller = select.poll()
        self._poller.register(self.fd, select.POLLIN)
        self._low_water = 1
        self._unready = 0
        #: What reads and writes bulk bodies natively (None: Python does), and how
        #: long it waits for the peer to make way while nothing moves (a lane's
        #: spin, see :meth:`TcpLane.set_spin`; 0: it moves what it can at once),
        #: yielding the processor meanwhile when ``bulk_yield``.
        self._streamer = spinner()
        self.bulk_idle = 0.0
        self.bulk_yield = False

    @property
    def rank_name(self) -> str:
        return f"rank {self.rank} on host {self.host}" if self.host else f"rank {self.rank}"

    # -- sending ----------------------------------------------------------

    def _check_writable(self) -> None:
        if self.closed is not None:
            raise PeerFailed(
                f"btl tcp: connection to {self.rank_name} is closed: {self.closed}", rank=self.rank
            )
        if self.writes_ended:
            raise PeerFailed(
                f"btl tcp: this rank ended its writes to {self.rank_name} mid-frame "
                "(its finalize gave up delivering to it)",
                rank=self.rank,
            )

    def push(self, outgoing: Outgoing) -> None:
        """Queue ``outgoing`` and send what the socket takes now."""
        self._check_writable()
        self.queue.append(outgoing)
        if len(self.queue) == 1:
            self.flush()

    def send_now(self, buffers: Sequence[memoryview | bytes | bytearray]) -> int:
        """Send one small frame with one ``sendmsg`` while nothing is queued; bytes sent.

        The fast way of an eager message: no queue entry unless the socket takes
        only part of it (the caller queues the rest). -1 when the connection
        failed (it is lost: its requests and module were told).
        """
        self._check_writable()
        return self.write_now(buffers)

    def write_now(self, buffers: Sequence[memoryview | bytes | bytearray]) -> int:
        """:meth:`send_now` once the connection is known open and writable."""
        try:
            return self.sock.sendmsg(buffers)
        except (BlockingIOError, InterruptedError):
            return 0
        except OSError as exc:
            self.lost(exc)
            return -1

    def keep_rest(
        self,
        buffers: Sequence[memoryview | bytes | bytearray],
        sent: int,
        tag: int,
        size: int,
        cost: int,
    ) -> None:
        """Queue a private copy of what :meth:`send_now` did not send of an active
        message (``size`` body bytes after its frame header), owned up to ``cost``."""
        whole = b"".join(buffers)
        head = whole[wire.FRAME.size : wire.FRAME.size + PLACEMENT_HEAD]
        rest = memoryview(whole)[sent:]
        self.push(Outgoing([rest], None, False, tag, size, head, cost, started=sent > 0))
        self.owned += cost

    def flush(self) -> int:
        """Send queued data until the socket would block; return completions."""
        done = 0
        sock = self.sock
        while self.queue:
            outgoing = self.queue[0]
            buffers = outgoing.buffers
            flags = MSG_ZEROCOPY if outgoing.zerocopy and self.zerocopy.enabled else 0
            drained = not flags and self._drains(buffers)
            if drained:
                sent = self._drain(buffers[0])
                if sent <= 0:
                    return done  # no room came in time, or the connection is lost
                piece = buffers
            else:
                piece = _first_bytes(buffers, self.bulk_chunk)
                try:
                    sent = (
                        sock.send(piece[0], flags)
                        if len(piece) == 1
                        else sock.sendmsg(piece, (), flags)
                    )
                except BlockingIOError:
                    return done
                except OSError as exc:
                    if exc.errno == errno.ENOBUFS and flags:
                        self.zerocopy.out_of_memory()
                        continue
                    self.lost(exc)
                    return done
            if flags and sent:
                # The kernel reads these bytes later, header included: hold them.
                self.zerocopy.sent(piece)
            while sent:
                head = buffers[0]
                if sent >= head.nbytes:
                    sent -= head.nbytes
                    buffers.pop(0)
                else:
                    buffers[0] = head[sent:]
                    sent = 0
            while buffers and not buffers[0].nbytes:
                buffers.pop(0)
            if buffers:
                outgoing.started = True
                if drained:
                    return done  # one native write a call: other connections wait on it
                continue
            self.queue.popleft()
            self.owned -= outgoing.owned
            if outgoing.callback is not None:
                outgoing.callback(None)
            done += 1
        return done

    def _drains(self, buffers: list[memoryview]) -> bool:
        """Whether the rest of a frame goes out natively: one large writable buffer
        (a read-only one has no address ctypes gives), unpaced."""
        return (
            self._streamer is not None
            and len(buffers) == 1
            and buffers[0].nbytes > STREAM_MIN
            and not buffers[0].readonly
            and not self.bulk_chunk
        )

    def _drain(self, buffer: memoryview) -> int:
        """One native write of ``buffer`` as the peer makes room (see
        :meth:`Spinner.stream`): the bytes written, or -1 when the connection is lost."""
        start = ctypes.c_char.from_buffer(buffer)
        count = self._stream(ctypes.addressof(start), buffer.nbytes, True)
        if count < 0:
            self.lost(OSError(-count, os.strerror(-count)))
            return -1
        self.traffic[NATIVE_SENT] += count
        return count

    def queued_sends(self) -> list[QueuedSend]:
        """The active messages in the queue, oldest first (see :class:`QueuedSend`)."""
        return [
            QueuedSend(
                self.rank,
                outgoing.tag,
                outgoing.size,
                bytes(outgoing.head[:PLACEMENT_HEAD]),
                outgoing.callback is None,
            )
            for outgoing in self.queue
            if outgoing.tag >= 0
        ]

    def drop_queued(self, failure: BaseException) -> list[QueuedSend]:
        """Take every queued frame off, never to be written; the active messages among them.

        Pending sends among them fail with ``failure``. A frame the socket took
        a part of cannot be taken back, nor finished without waiting for the
        peer to read: this connection then writes nothing more (the socket's
        write side is shut after what the kernel holds), so the peer discards
        the cut frame and every message before it still arrives. Either way
        what is dropped is exactly what the peer never gets.
        """
        dropped = self.queued_sends()
        queue, self.queue = self.queue, deque()
        self.owned = 0
        if queue and queue[0].started and self.closed is None:
            self.writes_ended = True
            with contextlib.suppress(OSError):
                self.sock.shutdown(socket.SHUT_WR)
        for outgoing in queue:
            if outgoing.callback is not None:
                outgoing.callback(failure)
        return dropped

    def reap_zerocopy(self) -> None:
        """Consume MSG_ZEROCOPY completion notices from the error queue."""
        self.zerocopy.reap()

    # -- receiving ---------------------------------------------------------

    def receive(self) -> int:
        """Read and dispatch what is available; return messages handled.

        A read that took less than it asked for (the buffer's room, at most
        ``_READ_AHEAD``) took everything the socket had: its frames are parsed
        and the call ends, without another read to hear ``EAGAIN`` (the next
        poll says when more arrives). One that filled what it asked for reads
        again once its frames are parsed.
        """
        handled = 0
        drained = False
        while self.closed is None:
            if self._sink is not None:
                if not self._fill_sink():
                    return handled
                handled += 1
                continue
            if self.end > self.start:
                handled += self._parse()
                if self.in_bulk():
                    continue
            if drained or self.paused:
                return handled
            count = self.read()
            if count <= 0:
                return handled
            drained = self.drained
        return handled

    def read(self) -> int:
        """One read into the buffer, behind what it holds: bytes read, 0 when
        nothing waits, -1 when the connection is lost (and so told).

        :attr:`drained` says afterwards whether the read took less than it
        asked for (everything the socket had).
        """
        if self.start == self.end:
            self.start = self.end = 0
        elif self.end == len(self.buffer):
            remaining = self.end - self.start
            self.view[:remaining] = self.view[self.start : self.end]
            self.start, self.end = 0, remaining
        asked = min(len(self.buffer) - self.end, _READ_AHEAD)
        try:
            count = self.sock.recv_into(self.view[self.end : self.end + asked])
        except (BlockingIOError, InterruptedError):
            return 0
        except OSError as exc:
            self.lost(exc)
            return -1
        if count == 0:
            self.lost(ConnectionResetError(f"{self.rank_name} closed the connection"))
            return -1
        self.end += count
        self.drained = count < asked
        return count

    def holds_frame(self) -> bool:
        """Whether the buffer holds a whole frame header and, for a small active
        message, its body: what :meth:`receive` would act on without reading."""
        available = self.end - self.start
        if available < wire.FRAME.size:
            return False
        kind: int
        length: int
        kind, _tag, length, _aux = wire.FRAME.unpack_from(self.view, self.start)
        if kind != wire.AM:
            return True
        return not self.paused and (length > STREAM_MIN or available >= wire.FRAME.size + length)

    def parse_one(self) -> int:
        """Act on the first frame of the buffer only, as :meth:`receive` would."""
        handled = self._parse(1)
        self.frames_waiting = self.holds_frame()
        return handled

    def _parse(self, most: int = 1 << 62) -> int:
        self.frames_waiting = True  # until the loop ends without a dispatch raising
        handled = 0
        view = self.view
        header_size = wire.FRAME.size
        while handled < most and self.end - self.start >= header_size and self._sink is None:
            kind, tag, length, aux = wire.FRAME.unpack_from(view, self.start)
            if kind == wire.AM and self.paused:
                break  # the receiver holds enough of this peer's (see ``_flow``)
            body_at = self.start + header_size
            if kind in (wire.GET_DATA, wire.PUT):
                self.start = body_at
                self._begin_bulk(kind, length, aux)
                handled += 1
                continue
            if kind == wire.AM and length > STREAM_MIN:
                if length > self.module.limits.max_send_size:
                    self.lost(
                        ValueError(
                            f"{self.rank_name} sent a {length}-byte active message, above "
                            f"btl_tcp_max_send_size ({self.module.limits.max_send_size})"
                        )
                    )
                    return handled
                if self.end - body_at < PLACEMENT_HEAD:
                    break
                self.start = body_at
                self._begin_stream(tag, length)
                handled += 1
                continue
            if kind not in wire.KINDS:
                self.lost(ValueError(f"{self.rank_name} sent an unknown frame kind {kind}"))
                return handled
            if self.end - body_at < length:
                if header_size + length > len(self.buffer):
                    self.lost(
                        ValueError(
                            f"{self.rank_name} sent a {length}-byte frame, above max_send_size"
                        )
                    )
                break
            self.start = body_at + length
            self.module.dispatch(self, kind, tag, aux, view[body_at : body_at + length])
            handled += 1
        self.frames_waiting = False
        return handled

    # -- failure -----------------------------------------------------------

    def lost(self, error: BaseException) -> None:
        if self.closed is not None:
            return
        self.closed = error
        failure = PeerFailed(f"btl tcp: lost {self.rank_name}: {error}", rank=self.rank)
        self.close(failure)
        queue, self.queue = self.queue, deque()
        self.owned = 0
        for outgoing in queue:
            if outgoing.callback is not None:
                outgoing.callback(failure)
        self.module.connection_lost(self, failure)

    def close(self, why: BaseException | None = None) -> None:
        if self.closed is None:
            self.closed = ConnectionAbortedError("closed locally")
        self.zerocopy.reap()
        self.zerocopy.release()
        with contextlib.suppress(OSError):
            self.sock.close()
        sink, self._sink = self._sink, None
        if sink is not None and sink.abandoned is not None:
            if why is None:
                why = BtlError(f"btl tcp: connection to {self.rank_name} closed mid-message")
            sink.abandoned(why)
