"""Lanes: the message layer's blocking eager send and receive to one sm peer.

A blocking ``send`` of a small message and a blocking ``recv`` that waits
for one are the latency of any ping-pong. Through the general path each
builds a request, packs a match header in Python, runs the btl's progress
and an active-message callback; a lane does each in one native call
(``lane.c``): :attr:`SmLane.send` writes the match header and the payload
into one fragment, and :attr:`SmLane.receive` polls the receive FIFO for a
moment and, when its head is the awaited message, copies the payload out. Whatever else it
takes off the FIFO goes through :meth:`SmModule.handle` as progress would
take it, so the FIFO's order is never changed. :attr:`SmLane.receive_into`
lands the awaited message in the caller's buffer instead, and reads a
rendezvous (RGET) payload there itself with CMA and answers FIN, which
saves a rendezvous receive every Python step of the general path. A blocking
send of a rendezvous message is two native calls too: :attr:`SmLane.send_rget`
sends its header (with a registration that is bookkeeping only,
:meth:`SmLane.register`) and :attr:`SmLane.await_fin` polls for the
receiver's FIN, handing on whatever else comes first. The message layer decides
when a lane may be used (nothing queued or posted for that stream); the
lane only moves bytes.
"""

from __future__ import annotations

import ctypes
import errno
import functools
import os
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Protocol

from ._bindings import Delivery
from ._transport import (
    MATCH_HEADER_BYTES,
    PeerFault,
    SegmentOverwritten,
    TransportError,
    fault,
)

if TYPE_CHECKING:
    from .._interface import Limits, PeerFailed
    from ._transport import Transport


class LaneOwner(Protocol):
    """What a lane needs of its module (:class:`SmModule`): its transport,
    its limits, its handler for what a lane takes off the FIFO, and for a
    peer's fault met there, and the registrations of a lane's rendezvous sends."""

    transport: Transport
    limits: Limits

    def handle(self, source: int, tag: int, data: memoryview) -> int: ...

    def fault(self, exc: PeerFault) -> PeerFailed | None: ...

    def segment_overwritten(self, exc: SegmentOverwritten) -> None: ...

    def lane_key(self) -> int | None: ...

    def lane_mark(self, key: int, base: int, size: int) -> None: ...

    def lane_release(self, key: int) -> None: ...


#: ``receive``: nothing arrived in time (or the lane cannot be used now).
NOTHING = 0
#: ``receive``: another message arrived; :meth:`SmLane.hand_on` passes it on.
OTHER = 1
#: ``receive`` at least this: the awaited message arrived, ``status - LANDED``
#: bytes now in :attr:`SmLane.landing`.
LANDED = 2
#: ``send_buffer``: the body is larger than an eager message (nothing was sent).
LARGE = 1


def _unusable(*_: object) -> int:
    return -errno.ENOTCONN


class SmLane:
    """Peer ``rank``'s lane for active-message tag ``am_tag``.

    Every call, and :meth:`hand_on`, needs the module's :attr:`SmModule.lock`
    held (p2p holds the bml's, which is the same lock): ``receive_into`` runs
    without the GIL and changes the transport's context.

    :attr:`send` and :attr:`receive` are the native calls themselves, bound
    to this lane (a Python method around them would cost as much as the
    rest of the fast path): ``send(sequence, tag_low, tag_high, data, size)``
    with ``data`` a ``bytes`` of at most
    :attr:`payload_limit` bytes answers
    0 when sent, another value when the message must go the general way
    (sends queued ahead of it, no fragment or FIFO slot free, peer gone);
    ``receive(sequence, tag_low, tag_high)`` answers :data:`NOTHING`,
    :data:`OTHER`, ``LANDED + size`` (see :data:`LANDED`) or a negative
    errno for :meth:`check`. ``tag_low``/``tag_high`` are the 64-bit tag's
    halves (``tag & 0xFFFFFFFF``, ``tag >> 32``), each a C int: the calls
    take no ctypes argtypes.
    """

    __slots__ = (
        "_delivery",
        "_module",
        "_rank",
        "await_fin",
        "landing",
        "payload_limit",
        "receive",
        "receive_buffer",
        "receive_into",
        "send",
        "send_buffer",
        "send_rget",
        "send_rget_buffer",
    )

    #: A blocking rendezvous send may go through the lane (:meth:`reserve`).
    rendezvous = True

    def __init__(self, module: LaneOwner, rank: int, am_tag: int) -> None:
        transport = module.transport
        self._module = module
        self._rank = rank
        calls = transport.lane_calls(rank, am_tag)
        self._delivery = Delivery()
        context, lane, delivery = calls.context, calls.lane, ctypes.byref(self._delivery)
        self.send: Callable[[int, int, int, Any, int], int] = functools.partial(
            calls.send, context, lane
        )
        #: ``send_rget(sequence, tag, send_id, address, size, handle, len(handle))``:
        #: the rendezvous header of a message readable through this btl's
        #: ``handle`` alone, as the message layer packs it (0 when sent).
        self.send_rget: Callable[[int, int, int, int, int, bytes, int], int] = functools.partial(
            calls.send_rget, context, lane
        )
        #: ``send_rget_buffer(sequence, tag_low, tag_high, id_low, id_high, key_low,
        #: key_high, ctypes.py_object(body))``: :attr:`send_rget` for ``body`` (a
        #: C-contiguous buffer) where it lies, its handle packed natively from
        #: registration key ``key`` (:meth:`reserve`), for send id ``send_id`` (both
        #: as 32-bit halves): the payload's address (> 0) when sent, which
        #: :meth:`mark` then records; <= 0 when nothing was sent.
        self.send_rget_buffer: Callable[[int, int, int, int, int, int, int, Any], int] = (
            functools.partial(calls.send_rget_buffer, context, lane)
        )
        self.receive: Callable[[int, int, int], int] = functools.partial(
            calls.receive, context, delivery, lane
        )
        #: ``receive_into(sequence, tag_low, tag_high, address, capacity)``: as
        #: :attr:`receive`, but the awaited message, eager or a rendezvous this
        #: process may read with CMA, lands at ``address`` (``capacity`` bytes).
        self.receive_into: Callable[[int, int, int, int, int], int] = functools.partial(
            calls.receive_into, context, delivery, lane
        )
        #: ``await_fin(send_id)``: as :attr:`receive`, for the FIN of the
        #: rendezvous ``send_id`` sent with :attr:`send_rget`: ``LANDED +
        #: status`` (the FIN's status) when it came.
        self.await_fin: Callable[[int], int] = functools.partial(
            calls.await_fin, context, delivery, lane
        )
        #: Where :attr:`receive` copies the awaited payload (valid until the next receive).
        self.landing = calls.landing
        #: The largest payload that goes in one eager message.
        self.payload_limit = min(module.limits.eager_limit - MATCH_HEADER_BYTES, len(self.landing))
        #: ``send_buffer(sequence, tag_low, tag_high, ctypes.py_object(body))``: as
        #: :attr:`send`, with ``body`` any C-contiguous buffer read where it is:
        #: 0 when sent, :data:`LARGE` (nothing sent) when it holds more than
        #: :attr:`payload_limit` bytes, anything else when it goes the general way.
        self.send_buffer: Callable[[int, int, int, Any], int] = functools.partial(
            calls.send_buffer, context, lane, self.payload_limit
        )
        #: ``receive_buffer(sequence, tag_low, tag_high, ctypes.py_object(into))``: as
        #: :attr:`receive_into`, landing in ``into`` (a writable C-contiguous buffer;
        #: :data:`NOTHING` for any other object). A message larger than ``into`` is
        #: handed on (:data:`OTHER`): the general path reports the truncation.
        self.receive_buffer: Callable[[int, int, int, Any], int] = functools.partial(
            calls.receive_buffer, context, delivery, lane
        )
        transport.on_close(self.close)

    def reserve(self) -> int | None:
        """The registration key of a rendezvous send's payload (packed by
        :attr:`send_rget_buffer`), ``None`` when this btl offers no put/get."""
        if self.send is _unusable:
            return None
        return self._module.lane_key()

    def mark(self, key: int, address: int, size: int) -> None:
        """Let the peer read ``size`` bytes at ``address`` through ``key`` (bookkeeping
        only: sm pins nothing); :meth:`deregister` ends it."""
        self._module.lane_mark(key, address, size)

    def deregister(self, key: int) -> None:
        """End a :meth:`mark` once the peer answered FIN (or failed)."""
        self._module.lane_release(key)

    def hand_on(self) -> None:
        """After :data:`OTHER`: act on that message as progress would."""
        delivery = self._delivery
        source, offset = delivery.source, delivery.offset
        segment = self._module.transport.segment(source)
        if segment is not None:
            self._module.handle(source, delivery.tag, segment[offset : offset + delivery.length])

    def owed_fin(self) -> int:
        """After :attr:`receive_into` landed a rendezvous: the send id of the FIN that found
        no room to go (the caller sends it), else 0."""
        return int(self._delivery.offset)

    def check(self, status: int) -> None:
        """Raise for a negative :attr:`receive` status that is not "use the general path".

        A peer's fault (a bad FIFO entry, or a producer that died holding the
        FIFO's head) is that peer's failure, reported as progress reports it.
        """
        if status == -errno.EUCLEAN:
            self._module.segment_overwritten(self._module.transport.overwritten())
            return
        problem = fault(status, self._delivery.source)
        if problem is not None:
            self._module.fault(problem)  # what it takes next goes the usual way
            return
        if status < 0 and status != -errno.ENOTCONN:
            raise TransportError(
                -status,
                f"sm receive FIFO holds an entry that names no peer fragment (lane to rank "
                f"{self._rank}): {os.strerror(-status)}",
            )

    def set_spin(self, seconds: float, yielding: bool = False) -> None:
        """How long :attr:`receive` polls before it answers :data:`NOTHING` (every lane of
        this transport); not at all when ``yielding``: the native poll cannot yield."""
        if self.send is not _unusable:
            self._module.transport.set_lane_spin(0.0 if yielding else seconds)

    def close(self) -> None:
        """The peer is detached or the transport closed: every call answers "go the general way"."""
        self.send = self.send_rget = self.receive = self.receive_into = _unusable
        self.send_rget_buffer = _unusable
        self.send_buffer = self.receive_buffer = _unusable
        self.await_fin = _unusable
        self.landing = memoryview(b"")

    def __repr__(self) -> str:
        state = "closed" if self.send is _unusable else "open"
        return f"<sm lane to rank {self._rank}, {state}>"


__all__ = ["LANDED", "LARGE", "NOTHING", "OTHER", "LaneOwner", "SmLane"]
