"""Lanes: the message layer's blocking eager send and receive to one sm peer.

A blocking ``send`` of a small message and a blocking ``recv`` that waits
for one are the latency of any ping-pong. Through the general path each
builds a request, packs a match header in Python, runs the btl's progress
and an active-message callback; a lane does each in one native call
(``lane.c``): :meth:`SmLane.send` writes the match header and the payload
into one fragment, and :meth:`SmLane.receive` polls the receive FIFO for a
moment and says whether its head is the awaited message. Whatever else it
takes off the FIFO goes through :meth:`SmModule.handle` as progress would
take it, so the FIFO's order is never changed. The message layer decides
when a lane may be used (nothing queued or posted for that stream); the
lane only moves bytes.
"""

from __future__ import annotations

import ctypes
import errno
import os
from typing import TYPE_CHECKING

from ._transport import MATCH_HEADER_BYTES, TransportError, _Delivery

if TYPE_CHECKING:
    from ._module import SmModule

#: :meth:`SmLane.receive`: nothing arrived in time (or the lane cannot be used now).
NOTHING = 0
#: :meth:`SmLane.receive`: the awaited message is in :attr:`SmLane.payload`.
MATCHED = 1
#: :meth:`SmLane.receive`: another message arrived and went the general way.
OTHER = 2


def _unusable(*_: object) -> int:
    return -errno.ENOTCONN


class SmLane:
    """Peer ``rank``'s lane for active-message tag ``am_tag``."""

    __slots__ = (
        "_context",
        "_delivery",
        "_delivery_ref",
        "_key",
        "_module",
        "_rank",
        "_receive",
        "_segment",
        "_send",
        "payload",
        "payload_limit",
    )

    def __init__(self, module: SmModule, rank: int, am_tag: int) -> None:
        transport = module.transport
        self._module = module
        self._rank = rank
        self._key = rank | am_tag << 32
        self._context, self._send, self._receive = transport.lane_calls()
        self._delivery = _Delivery()
        self._delivery_ref = ctypes.byref(self._delivery)
        self._segment = transport.segment(rank)
        #: The largest payload that goes in one eager message.
        self.payload_limit = module.limits.eager_limit - MATCH_HEADER_BYTES
        #: The awaited message's payload after :data:`MATCHED` (valid until the next poll).
        self.payload = memoryview(b"")
        transport.on_close(self.close)

    def send(self, sequence: int, tag: int, data: bytes) -> bool:
        """Send ``data`` (at most :attr:`payload_limit` bytes) as eager message ``sequence``.

        ``False`` when it must go the general way: sends are queued, no
        fragment or FIFO slot is free, or the peer is gone.
        """
        if self._module.sends_queued:
            return False  # keep order behind what is already queued
        status = self._send(self._context, self._key, sequence, tag, data, len(data))
        if status == 0:
            return True
        if status in (-errno.EAGAIN, -errno.ENOTCONN):
            return False
        raise TransportError(-status, f"sm lane send to rank {self._rank}: {os.strerror(-status)}")

    def receive(self, sequence: int, tag: int) -> int:
        """Poll for eager message ``sequence`` with ``tag``: :data:`MATCHED`, :data:`OTHER`
        or :data:`NOTHING`."""
        if self._module.sends_queued:
            return NOTHING  # progress must flush them: the peer may be waiting
        status = self._receive(self._context, self._key, sequence, tag, self._delivery_ref)
        delivery = self._delivery
        if status == MATCHED:
            offset = delivery.offset
            self.payload = self._segment[offset : offset + delivery.length]  # type: ignore[index]
            return MATCHED
        if status == OTHER:
            source, offset = delivery.source, delivery.offset
            segment = self._module.transport.segment(source)
            if segment is not None:
                payload = segment[offset : offset + delivery.length]
                self._module.handle(source, delivery.tag, payload)
            return OTHER
        if status == 0 or status == -errno.ENOTCONN:
            return NOTHING
        raise TransportError(
            -status,
            f"sm receive FIFO holds an entry that names no peer fragment (lane {self._rank})",
        )

    def set_spin(self, seconds: float) -> None:
        """How long :meth:`receive` polls before it answers :data:`NOTHING` (every lane of
        this transport)."""
        if self._context is not None:
            self._module.transport.set_lane_spin(seconds)

    def close(self) -> None:
        """The peer is detached or the transport closed: every call answers "go the general way"."""
        self._send = self._receive = _unusable
        self._context = None
        self._segment = None
        self.payload = memoryview(b"")

    def __repr__(self) -> str:
        state = "closed" if self._context is None else "open"
        return f"<sm lane to rank {self._rank}, {state}>"


__all__ = ["MATCHED", "NOTHING", "OTHER", "SmLane"]
