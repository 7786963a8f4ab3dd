"""Lanes: the message layer's blocking eager send and receive to one tcp peer.

Through the general path a blocking ``recv`` posts a request, and the
message that completes it climbs the wait's progress call, the rail's poll,
the connection's parser, the module's dispatch and the message layer's
matching; a blocking ``send`` packs two headers and builds a list of views
per message. A lane does the same work in one place, with the connection's
own buffer and socket: :meth:`TcpLane.send` packs the frame and match headers
at once and writes them with the payload in one ``sendmsg`` (what it cannot
write now is queued, as ``sendi`` queues it); :meth:`TcpLane.receive` reads
the socket into the connection's buffer, and when the first frame there is
the awaited eager message takes it out, with no request and no callback. The
first frame is always the next thing the connection would have acted on, so
the stream's order is never changed: any other frame goes through the
connection as progress would take it (:meth:`TcpLane.hand_on`), and a frame
a lane does not handle (a large message streamed into place, get or put
data) sends the receive the general way. While waiting, a lane polls every
socket of its rail in C with the GIL released (``pmca.btl.bml._spin``) for
its spin at most; input on another socket, or queued output, also sends the
receive the general way, which serves everything. The message layer decides
when a lane may be used (nothing queued or posted for that stream); the
lane only moves bytes. Every call needs the bml's lock held, as progress does.
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Any, Protocol

from ..base._buffers import flat_bytes
from ..base._pvars import (
    BYTES_RECEIVED,
    BYTES_SENT,
    LANE_RECEIVED,
    LANE_SENT,
    MESSAGES_RECEIVED,
    MESSAGES_SENT,
)
from ..bml._spin import SLICE, spinner
from . import _wire as wire
from ._bulk import STREAM_MIN
from ._connection import QUEUED_COST

if TYPE_CHECKING:
    from .._interface import Limits
    from ._connection import Connection

#: ``receive``: nothing arrived in time (or the lane cannot be used now).
NOTHING = 0
#: ``receive``: another message is first; :meth:`TcpLane.hand_on` passes it on.
OTHER = 1
#: ``receive`` at least this: the awaited message arrived, ``status - LANDED`` bytes.
LANDED = 2
#: ``send_buffer``: the body is larger than an eager message (nothing was sent).
LARGE = 1
#: ``send``, ``send_buffer``: the message must go the general way (nothing was sent);
#: negative, unlike :data:`LARGE`, as btl/sm's lanes answer.
_GENERAL = -1

_FRAME = wire.FRAME
_FRAME_SIZE = wire.FRAME.size
_MATCH_SIZE = wire.MATCH.size
_HEAD_SIZE = wire.LANE_HEAD.size
_pack_head = wire.LANE_HEAD.pack
_unpack_frame = wire.FRAME.unpack_from
_unpack_match = wire.MATCH.unpack_from
_monotonic = time.monotonic


def _flat(body: object, *, writable: bool) -> memoryview | None:
    """``body``'s bytes as a flat view, ``None`` when it exports no C-contiguous
    buffer (or no writable one, when ``writable``)."""
    try:
        view = memoryview(body)  # type: ignore[arg-type]
    except TypeError:
        return None
    if not view.c_contiguous or (writable and view.readonly):
        return None
    return flat_bytes(view)


class _Rail(Protocol):
    """What a lane needs of its module (:class:`TcpModule`)."""

    limits: Limits

    def spin_fds(self) -> list[int] | None: ...


class TcpLane:
    """The lane to ``connection``'s peer for active-message tag ``am_tag``.

    ``send(sequence, tag_low, tag_high, data, size)`` sends ``data`` (at
    most :attr:`payload_limit` bytes) as the eager message ``sequence``: 0
    when the connection took it, 1 when it must go the general way (output
    queued ahead of it, the connection closed, or its copy would pass
    ``btl_tcp_send_queue_limit``). ``receive(sequence, tag_low, tag_high)``
    answers :data:`NOTHING`, :data:`OTHER` or ``LANDED + size`` with the
    payload in :attr:`landing`. A rendezvous never travels a tcp lane.
    """

    __slots__ = (
        "_am_tag",
        "_connection",
        "_rail",
        "_spin",
        "_spinner",
        "_yielding",
        "landing",
        "payload_limit",
    )

    #: A blocking rendezvous send goes the general way: the receiver's get
    #: travels on the connection as a frame the lane would hand on anyway.
    rendezvous = False

    def __init__(self, rail: _Rail, connection: Connection, am_tag: int) -> None:
        self._rail = rail
        self._connection = connection
        self._am_tag = am_tag
        #: The largest payload that goes in one eager message parsed from the buffer.
        self.payload_limit = min(rail.limits.eager_limit, STREAM_MIN) - _MATCH_SIZE
        #: Where :meth:`receive` left the awaited payload (valid until the next receive).
        self.landing = memoryview(b"")
        self._spin = 0.0
        self._yielding = False
        found = spinner()
        self._spinner = found.another() if found is not None else None

    # -- sending ------------------------------------------------------------

    def send(
        self,
        sequence: int,
        tag_low: int,
        tag_high: int,
        data: bytes | bytearray | memoryview,
        size: int,
    ) -> int:
        connection = self._connection
        total = _MATCH_SIZE + size
        cost = total + QUEUED_COST
        if (
            connection.queue
            or connection.closed is not None
            or connection.writes_ended
            or connection.owned + cost > connection.queue_limit
            or _FRAME_SIZE + total > connection.write_max
        ):
            return _GENERAL
        am_tag = self._am_tag
        header = _pack_head(
            wire.AM, am_tag, total, 0, wire.EAGER, 0, sequence, tag_high << 32 | tag_low, size
        )
        buffers: list[memoryview | bytes | bytearray] = [header, data]
        sent = connection.write_now(buffers)  # checked above: open, writes not ended
        if sent < 0:
            return _GENERAL  # lost: the general way names the failure
        counts = connection.traffic
        counts[MESSAGES_SENT] += 1
        counts[BYTES_SENT] += total
        counts[LANE_SENT] += 1
        if sent < _FRAME_SIZE + total:
            connection.keep_rest(buffers, sent, am_tag, total, cost)
        return 0

    def send_buffer(self, sequence: int, tag_low: int, tag_high: int, boxed: Any) -> int:
        """:meth:`send` of the buffer ``boxed`` holds (a ``ctypes.py_object``): 0
        when the connection took it, :data:`LARGE` when it is larger than an eager
        message, :data:`_GENERAL` otherwise (also for an object that exports no
        C-contiguous buffer: the general way names why)."""
        body = boxed.value
        if type(body) is not bytes and type(body) is not bytearray:
            body = _flat(body, writable=False)
            if body is None:
                return _GENERAL
        size = len(body)
        if size > self.payload_limit:
            return LARGE
        return self.send(sequence, tag_low, tag_high, body, size)

    # a blocking rendezvous send always goes the general way over tcp
    def send_rget(
        self, sequence: int, tag: int, send_id: int, address: int, size: int, h: bytes, n: int
    ) -> int:
        return _GENERAL

    def send_rget_buffer(
        self, sequence: int, tl: int, th: int, il: int, ih: int, kl: int, kh: int, body: Any
    ) -> int:
        return _GENERAL

    def reserve(self) -> int | None:
        return None

    def mark(self, key: int, address: int, size: int) -> None:
        return None

    def deregister(self, key: int) -> None:
        return None

    def await_fin(self, send_id: int) -> int:
        return NOTHING

    def owed_fin(self) -> int:
        return 0

    # -- receiving ----------------------------------------------------------

    def receive_into(
        self, sequence: int, tag_low: int, tag_high: int, address: int, capacity: int
    ) -> int:
        """:data:`NOTHING` at once: a receive larger than any eager message waits for
        a rendezvous, which the general path matches as it arrives."""
        return NOTHING

    def receive_buffer(self, sequence: int, tag_low: int, tag_high: int, boxed: Any) -> int:
        """:meth:`receive` landing the awaited payload in the buffer ``boxed`` holds (a
        ``ctypes.py_object``; :data:`NOTHING` for an object that exports no writable
        C-contiguous buffer). A message larger than the buffer is handed on
        (:data:`OTHER`): the general path reports the truncation. A buffer larger
        than an eager message may wait for a rendezvous: :data:`NOTHING` at once."""
        into = _flat(boxed.value, writable=True)
        if into is None or len(into) > self.payload_limit:
            return NOTHING
        status = self.receive(sequence, tag_low, tag_high, len(into))
        if status >= LANDED:
            into[: status - LANDED] = self.landing
        return status

    def receive(self, sequence: int, tag_low: int, tag_high: int, capacity: int = -1) -> int:
        """The awaited eager message's payload into :attr:`landing`; one larger than
        ``capacity`` (when not -1) is another message (:data:`OTHER`)."""
        tag = tag_high << 32 | tag_low
        connection = self._connection
        view = connection.view
        deadline = 0.0
        while connection.closed is None and not connection.in_bulk():
            start, end = connection.start, connection.end
            if end - start >= _FRAME_SIZE:
                kind, am_tag, length, _aux = _unpack_frame(view, start)
                if kind != wire.AM or length > STREAM_MIN:
                    return self._left(NOTHING)  # streamed or bulk: the general way routes it
                if end - start - _FRAME_SIZE >= length:
                    if length >= _MATCH_SIZE and am_tag == self._am_tag:
                        body = start + _FRAME_SIZE
                        match, _flags, seq, user_tag, size = _unpack_match(view, body)
                        if (
                            match == wire.EAGER
                            and seq == sequence
                            and user_tag == tag
                            and size == length - _MATCH_SIZE
                            and (capacity < 0 or size <= capacity)
                        ):
                            body += _MATCH_SIZE
                            connection.start = body + size
                            counts = connection.traffic
                            counts[MESSAGES_RECEIVED] += 1
                            counts[BYTES_RECEIVED] += length
                            counts[LANE_RECEIVED] += 1
                            self.landing = view[body : body + size]
                            return self._left(LANDED + size)
                    return self._left(OTHER)
            # the awaited frame is not all here: wait for input, then read it
            if deadline == 0.0:
                deadline = _monotonic() + self._spin
            elif _monotonic() >= deadline:
                return self._left(NOTHING)
            readable = self._readable(deadline)
            if readable < 0:
                return self._left(NOTHING)
            if readable and connection.read() < 0:
                return NOTHING  # lost: the general way names the failure
        return NOTHING

    def _readable(self, deadline: float) -> int:
        """Poll the rail's sockets for a slice before ``deadline``: 1 when this one
        has input, 0 when none had, -1 when another one has or output waits (the
        general path serves them)."""
        spinning = self._spinner
        fds = self._rail.spin_fds()
        if spinning is None or fds is None:
            return -1
        seconds = min(deadline - _monotonic(), SLICE)
        ready = spinning.ready(fds, seconds, self._yielding)
        if not ready:
            return -1 if ready is None else 0
        return 1 if len(ready) == 1 and ready[0] == self._connection.fd else -1

    def _left(self, status: int) -> int:
        """``status``, once the connection knows whether frames wait in its buffer
        (read by the lane, they would not show on the next poll)."""
        connection = self._connection
        connection.frames_waiting = connection.holds_frame()
        return status

    def hand_on(self) -> None:
        """After :data:`OTHER`: act on that frame as progress would."""
        self._connection.parse_one()

    def check(self, status: int) -> None:
        """Nothing to raise: a lost connection is named by the general way."""

    def set_spin(self, seconds: float, yielding: bool = False) -> None:
        """How long :meth:`receive` waits for input before it answers :data:`NOTHING`
        (0: it looks once), yielding the processor between polls when ``yielding``
        (``mpi_yield_when_idle``), as a wait's native poll does."""
        self._spin = seconds
        self._yielding = yielding
        # a large body moved natively by the connection waits as long for the peer
        self._connection.bulk_idle = seconds
        self._connection.bulk_yield = yielding

    def __repr__(self) -> str:
        state = "closed" if self._connection.closed is not None else "open"
        return f"<tcp lane to rank {self._connection.rank}, {state}>"


__all__ = ["LANDED", "LARGE", "NOTHING", "OTHER", "TcpLane"]
