"""Blocking ``send``/``recv``: through a btl's lane when one applies, else a request.

A lane (btl/sm offers them) moves one eager message to or from one peer in
one native call. ``send`` uses it for a message that fits the eager limit
when nothing is queued ahead of it; ``recv`` when nothing for its
(source, tag) stream is already unexpected or posted and no message from
that source waits out of order. The lane polls only its btl's receive queue
and only briefly (``lane_spin``); whatever else it takes off that queue goes
through the general path in arrival order, and when the awaited message does
not come the receive becomes an ordinary request, so matching order,
truncation, timeouts, peer failures and finalize behave exactly as they do
for ``isend``/``irecv`` + ``wait``. Both run under the bml's lock, like
every other p2p operation.
"""

from __future__ import annotations

from collections import deque
from typing import TYPE_CHECKING, Any, Protocol

from ._buffers import as_bytes
from ._requests import Request, truncation

if TYPE_CHECKING:
    from ..btl.bml import Bml

TAG_MIN, TAG_MAX = -(1 << 63), (1 << 63) - 1
#: How long a lane receive polls before the receive becomes a request.
LANE_SPIN = 20e-6
#: Messages of other streams a lane receive hands on before it becomes a request.
_LANE_ROUNDS = 64
_MATCHED, _NOTHING = 1, 0


class Lane(Protocol):
    """What a btl offers the message layer for one peer (``module.open_lane``)."""

    payload: memoryview
    payload_limit: int

    def send(self, sequence: int, tag: int, data: bytes) -> bool: ...
    def receive(self, sequence: int, tag: int) -> int: ...
    def set_spin(self, seconds: float) -> None: ...


class Blocking:
    """``send``/``recv`` of :class:`pmca.p2p.P2p`."""

    _bml: Bml
    _closed: bool
    _lanes: dict[int, Lane]
    _seq_out: list[int]
    _seq_in: list[int]
    _stash: list[dict[int, tuple[int, bytes]]]
    _posted: dict[tuple[int, int], deque[Request]]
    _unexpected: dict[tuple[int, int], deque[Any]]

    def isend(self, dest: int, tag: int, buf: Any) -> Request:
        raise NotImplementedError

    def irecv(self, source: int, tag: int, buf: Any) -> Request:
        raise NotImplementedError

    def send(self, dest: int, tag: int, buf: Any, *, timeout: float | None = None) -> None:
        """Send ``buf`` to ``dest``; return when ``buf`` may be reused."""
        lane = self._lanes.get(dest) if type(dest) is int else None
        if lane is not None and type(tag) is int and TAG_MIN <= tag <= TAG_MAX:
            kind = type(buf)
            if kind is not bytes and kind is not bytearray:
                buf = as_bytes(buf, writable=False, rank=dest, tag=tag)
            # one copy into bytes: a ctypes call takes them without conversion
            if len(buf) <= lane.payload_limit and self._send_on(
                lane, dest, tag, buf if kind is bytes else bytes(buf)
            ):
                return
        self.isend(dest, tag, buf).wait(timeout)

    def recv(self, source: int, tag: int, buf: Any, *, timeout: float | None = None) -> int:
        """Receive the next message from ``source`` with ``tag`` into ``buf``; return its size."""
        lane = self._lanes.get(source) if type(source) is int else None
        if lane is not None and type(tag) is int and TAG_MIN <= tag <= TAG_MAX:
            into = (
                buf
                if type(buf) is bytearray
                else as_bytes(buf, writable=True, rank=source, tag=tag)
            )
            size = self._receive_on(lane, source, tag, into)
            if size is not None:
                return size
        return self.irecv(source, tag, buf).wait(timeout)

    def _send_on(self, lane: Lane, dest: int, tag: int, data: bytes) -> bool:
        lock = self._bml.lock
        lock.acquire()
        try:
            if self._closed or self._bml.peers[dest].failed is not None:
                return False  # the general path says why
            sequence = self._seq_out[dest]
            if not lane.send(sequence, tag, data):
                return False
            self._seq_out[dest] = (sequence + 1) & 0xFFFFFFFF
            return True
        finally:
            lock.release()

    def _receive_on(self, lane: Lane, source: int, tag: int, into: Any) -> int | None:
        """The message's size, or ``None``: receive it as a request."""
        key = (source, tag)
        lock = self._bml.lock
        lock.acquire()
        try:
            if self._closed:
                return None
            peer = self._bml.peers[source]
            stash, posted, unexpected = self._stash[source], self._posted, self._unexpected
            for _ in range(_LANE_ROUNDS):
                if key in unexpected or key in posted or stash or peer.failed is not None:
                    return None
                sequence = self._seq_in[source]
                status = lane.receive(sequence, tag)
                if status == _MATCHED:
                    self._seq_in[source] = (sequence + 1) & 0xFFFFFFFF
                    payload = lane.payload
                    size = len(payload)
                    if size > len(into):
                        raise truncation(size, source, tag, len(into))
                    into[:size] = payload
                    return size
                if status == _NOTHING:
                    return None
            return None
        finally:
            lock.release()

    def _set_lane_spin(self, seconds: float) -> None:
        for lane in self._lanes.values():
            lane.set_spin(seconds)


__all__ = ["LANE_SPIN", "TAG_MAX", "TAG_MIN", "Blocking", "Lane"]
