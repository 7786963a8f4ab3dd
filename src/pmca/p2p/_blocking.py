"""Blocking ``send``/``recv``: through a btl's lane when one applies, else a request.

A lane (btl/sm offers them) moves one eager message to or from one peer in
one native call, which takes the caller's buffer object itself: the sender's
bytes go from it straight into the message, and the receiver's message lands
straight in it, whatever exports the buffer (bytes, bytearray, memoryview,
array, numpy). ``send`` uses it for a message that fits the eager limit
when nothing is queued ahead of it; ``recv`` of a specific source and tag
when nothing for its (source, tag) stream is already unexpected, no posted
receive (wildcards included) would take that stream's next message, and no
message from that source waits out of order. The btl may read a
rendezvous payload itself and answer FIN (btl/sm does, with CMA), so a large
blocking receive costs no Python step either. A blocking ``send`` of a larger
message sends its rendezvous header through the lane (a registration that is
bookkeeping only) and polls the lane for the receiver's FIN, becoming a
request only when the FIN is slow to come. The lane polls only its btl's receive queue
and only briefly (``lane_spin``); whatever else it takes off that queue goes
through the general path in arrival order, and when the awaited message does
not come the receive becomes an ordinary request, so matching order,
truncation, timeouts, peer failures and finalize behave exactly as they do
for ``isend``/``irecv`` + ``wait``. Both run under the bml's lock, like
every other p2p operation.
"""

from __future__ import annotations

import ctypes
import functools
import itertools
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Literal, Protocol, cast, overload

from ..btl.base._buffers import flat_bytes
from . import _protocol as proto
from ._buffers import as_bytes
from ._checks import check_timeout
from ._matching import TAG_UB, Posted, Unexpected
from ._requests import Request, Status, fin_error

if TYPE_CHECKING:
    from ..btl.bml import Bml, BmlPeer
    from ._requests import Progress

#: How long a lane receive polls before the receive becomes a request.
LANE_SPIN = 20e-6
#: Messages of other streams a lane receive hands on before it becomes a request.
_LANE_ROUNDS = 64
_OTHER, _LANDED = 1, 2
#: ``send_buffer``: the body is larger than an eager message; else 0 when sent.
LARGE = 1
_REFUSED = -1
_boxed = ctypes.py_object
#: A blocking rendezvous send polls its lane for the FIN for one lane spin per
#: 64 KiB (the peer reads meanwhile), then becomes a request; a message whose
#: read would outlast 64 spins (4 MiB) goes the general way from the start.
#: Measured over sm (paired ping-pongs, same job), the lane's send took 0.78x
#: the general way's time at 512 KiB, 0.89x at 1 MiB, 0.83x at 2 MiB, and the
#: same at 4 MiB: below that the bml's lock is held at most ~1.3 ms.
_FIN_SHIFT = 16
_FIN_ROUNDS = 64
_LANE_RENDEZVOUS_MAX = _FIN_ROUNDS << _FIN_SHIFT
_LOW = 0xFFFFFFFF


class Lane(Protocol):
    """What a btl offers the message layer for one peer (``module.open_lane``).

    ``send_buffer(sequence, tag_low, tag_high, body)`` sends the caller's
    buffer (``body`` is a ``ctypes.py_object`` holding it: any C-contiguous
    buffer, read where it is, never copied to bytes) as the eager message
    ``sequence``: 0 when sent, :data:`LARGE` when it holds more than
    ``payload_limit`` bytes, anything else when it must go the general way;
    nothing is sent then. ``receive_buffer(sequence, tag_low, tag_high,
    into)`` polls briefly for that message and lands it in ``into`` (a
    ``py_object`` holding a writable C-contiguous buffer): ``2 + size`` when
    it arrived, 1 when another one did (or the awaited one does not fit
    ``into``) and must be handed on (:meth:`hand_on`), 0 when nothing came
    or ``into`` is no such buffer, < 0 an error (:meth:`check`). The lane may
    read a rendezvous payload itself (a message larger than
    ``payload_limit``): :meth:`owed_fin` then names a FIN the lane could not
    send. The tag travels as its low and high 32 bits.
    ``send_rget(sequence, tag, send_id, address, size, handle, len(handle))``
    sends a rendezvous header whose payload only this btl's ``handle`` reads.
    A blocking rendezvous send takes a key with ``reserve()`` (``None``: the
    btl reads nothing), sends its header with ``send_rget_buffer(sequence,
    tag_low, tag_high, id_low, id_high, key_low, key_high, body)`` (the send
    id and the key as 32-bit halves too, ``body`` a ``py_object`` holding the
    buffer, which the btl's handle names where it lies): the payload's
    address when sent, else <= 0 and nothing was sent; ``mark(key, address,
    size)`` then lets the peer read it and ``deregister(key)`` ends that;
    ``await_fin(send_id)`` polls as ``receive_buffer`` does for the FIN of that
    send: ``2 + status`` when it came. ``rendezvous`` says whether these may
    carry a rendezvous at all (``False``: a large blocking send never tries
    the lane).
    ``set_spin(seconds, yielding)``: how long a receive polls at most, and
    whether the processor is yielded between polls (``mpi_yield_when_idle``;
    a lane whose poll cannot yield then does not poll).
    """

    payload_limit: int
    rendezvous: bool
    send_buffer: Callable[[int, int, int, ctypes.py_object[Any]], int]
    send_rget: Callable[[int, int, int, int, int, bytes, int], int]
    receive_buffer: Callable[[int, int, int, ctypes.py_object[Any]], int]

    def hand_on(self) -> None: ...
    def owed_fin(self) -> int: ...
    def check(self, status: int) -> None: ...
    def set_spin(self, seconds: float, yielding: bool) -> None: ...

    # a blocking rendezvous send's registration, header and FIN
    await_fin: Callable[[int], int]

    send_rget_buffer: Callable[[int, int, int, int, int, int, int, ctypes.py_object[Any]], int]

    def reserve(self) -> int | None: ...
    def mark(self, key: int, address: int, size: int) -> None: ...
    def deregister(self, key: int) -> None: ...


class Blocking:
    """``send``/``recv`` of :class:`pmca.p2p.P2p`."""

    _bml: Bml
    _peers: list[BmlPeer]
    _closed: bool
    _lanes: dict[int, Lane]
    _seq_out: list[int]
    _seq_in: list[int]
    _stash: list[dict[int, tuple[int, bytes]]]
    _posted: Posted[Request]
    _unexpected: Unexpected[Any]
    #: Peers that finalized (:mod:`._leaving`).
    gone: dict[int, Any]
    #: Peers whose lane may carry a rendezvous: their only RDMA route is the lane's btl.
    _rget_lanes: dict[int, Lane]
    _ids: itertools.count[int]
    # P2p's, used here:
    _track: Callable[[Request], None]
    _awaiting_answer: Callable[..., int]

    def isend(self, dest: int, tag: int, buf: Any) -> Request:
        raise NotImplementedError

    def irecv(self, source: int, tag: int, buf: Any) -> Request:
        raise NotImplementedError

    def _control_to(self, rank: int, message: bytes) -> None:
        raise NotImplementedError

    def _checked(self, rank: object, tag: object, where: str, *, wildcard: bool) -> tuple[int, int]:
        raise NotImplementedError

    def _start_send(self, dest: int, tag: int, view: memoryview) -> Request | None:
        raise NotImplementedError

    def send(self, dest: int, tag: int, buf: Any, *, timeout: float | None = None) -> None:
        """Send ``buf`` to ``dest``; return when ``buf`` may be reused.

        A ``TimeoutError`` does not take the message back: it stays queued and
        is still delivered if the peer reads it later (or named at finalize if
        it never is), so ``buf`` must stay unchanged until the session ends.
        :class:`pmca.btl.PeerFinalized` when ``dest`` finalized, also while a
        large (rendezvous) message waited for it to be received.
        """
        if timeout is not None:
            timeout = check_timeout(timeout, "p2p send")
        lane = self._lanes.get(dest) if type(dest) is int else None
        if lane is not None and type(tag) is int and 0 <= tag <= TAG_UB:
            lock = self._bml.lock
            lock.acquire()
            try:
                if self._closed or self._peers[dest].failed is not None or dest in self.gone:
                    sent = _REFUSED
                else:
                    sequence = self._seq_out[dest]
                    sent = lane.send_buffer(sequence, tag & _LOW, tag >> 32, _boxed(buf))
                    if sent == 0:
                        self._seq_out[dest] = (sequence + 1) & _LOW
                        return
            finally:
                lock.release()
            rget = self._rget_lanes.get(dest) if sent == LARGE else None
            if rget is not None:
                # LARGE: the lane took the buffer as C-contiguous; this view pins a
                # bytearray's storage until the FIN
                view = flat_bytes(memoryview(buf))
                if view.nbytes < _LANE_RENDEZVOUS_MAX and self._send_rendezvous(
                    dest, tag, view, rget, timeout
                ):
                    return
        dest, tag = self._checked(dest, tag, "p2p send", wildcard=False)
        view = as_bytes(buf, writable=False, rank=dest, tag=tag)
        request = self._start_send(dest, tag, view)
        if request is not None:  # else the btl took it at once (tcp's sendi): no request
            request.wait(timeout)

    def _send_rendezvous(
        self, dest: int, tag: int, view: memoryview, lane: Lane, timeout: float | None
    ) -> bool:
        """A blocking rendezvous send through ``lane``: its header, then its FIN polled
        for natively; ``False`` when it must go the general way (nothing was sent).

        When the FIN does not come soon (the receiver is busy, or reads through
        the general path) the send becomes a request the FIN completes, so
        ``timeout``, peer failures and finalize reach it as they reach ``isend``.
        """
        size = view.nbytes
        lock = self._bml.lock
        lock.acquire()
        try:
            if self._closed or self._peers[dest].failed is not None or dest in self.gone:
                return False  # the general way says why
            key = lane.reserve()
            if key is None:
                return False
            send_id = next(self._ids)
            sequence = self._seq_out[dest]
            address = lane.send_rget_buffer(
                sequence,
                tag & _LOW,
                tag >> 32,
                send_id & _LOW,
                send_id >> 32,
                key & _LOW,
                key >> 32,
                _boxed(view),
            )
            if address <= 0:
                return False  # nothing was sent (the key is never used)
            # before the FIN is awaited: a peer that cannot read with CMA asks for the
            # payload through the lane's btl, which checks this registration
            lane.mark(key, address, size)
            self._seq_out[dest] = (sequence + 1) & _LOW
            try:
                status = self._await_fin(dest, lane, send_id, size)
            except BaseException:  # the FIN may still come: let it find the send
                self._pending_send(dest, tag, view, lane, key, send_id)
                raise
            if status >= _LANDED:
                lane.deregister(key)
                error = fin_error(dest, status - _LANDED, tag, size)
                if error is not None:
                    raise error
                return True
            request = self._pending_send(dest, tag, view, lane, key, send_id)
        finally:
            lock.release()
        request.wait(timeout)
        return True

    def _pending_send(
        self, dest: int, tag: int, view: memoryview, lane: Lane, key: int, send_id: int
    ) -> Request:
        """The request a lane's rendezvous send becomes while its FIN has not come."""
        request = Request(cast("Progress", self), "send", dest, tag, view)
        self._track(request)
        request.cleanup.append(functools.partial(lane.deregister, key))
        self._awaiting_answer(request, send_id)
        return request

    def _await_fin(self, dest: int, lane: Lane, send_id: int, size: int) -> int:
        """Poll ``lane`` for the FIN of ``send_id`` while ``size`` bytes are read:
        ``2 + status`` when it came, 0 when it did not in time or ``dest`` failed or
        finalized (a LEAVE handed on: no FIN comes after it)."""
        peer = self._peers[dest]
        gone = self.gone
        patience = 1 + (size >> _FIN_SHIFT)
        idle = others = 0
        while peer.failed is None and dest not in gone:
            status = lane.await_fin(send_id)
            if status >= _LANDED:
                return status
            if status == _OTHER:
                lane.hand_on()
                others += 1
                if others == _LANE_ROUNDS:
                    break
            elif status == 0:
                idle += 1
                if idle == patience:
                    break
            else:
                lane.check(status)
                break
        return 0

    @overload
    def recv(
        self,
        source: int,
        tag: int,
        buf: Any,
        *,
        timeout: float | None = None,
        status: Literal[False] = False,
    ) -> int: ...
    @overload
    def recv(
        self,
        source: int,
        tag: int,
        buf: Any,
        *,
        timeout: float | None = None,
        status: Literal[True],
    ) -> Status: ...
    def recv(
        self, source: int, tag: int, buf: Any, *, timeout: float | None = None, status: bool = False
    ) -> int | Status:
        """Receive the next matching message into ``buf``; return its size, or its
        :class:`Status` with ``status=True``.

        ``source`` may be :data:`~pmca.p2p.ANY_SOURCE` and ``tag``
        :data:`~pmca.p2p.ANY_TAG`. Through the lane while nothing of that
        (source, tag) stream is unexpected, no posted receive would take it
        and nothing from ``source`` waits out of order; a message that
        arrived before the peer failed is still received.
        """
        if timeout is not None:
            timeout = check_timeout(timeout, "p2p recv")
        lane = self._lanes.get(source) if type(source) is int else None
        if lane is not None and type(tag) is int and 0 <= tag <= TAG_UB:
            low, high = tag & _LOW, tag >> 32
            into = _boxed(buf)
            stash, posted, seq_in = self._stash[source], self._posted, self._seq_in
            # the queues' own containers (changed in place): no method call per round
            unexpected, streams, wild = self._unexpected.streams, posted.streams, posted.wild
            lock = self._bml.lock
            lock.acquire()
            try:
                others = 0
                while not (
                    self._closed
                    or source in self.gone
                    or (unexpected and (source, tag) in unexpected)
                    or (streams and (source, tag) in streams)
                    or (wild and posted.waiting(source, tag))
                    or stash
                ):
                    sequence = seq_in[source]
                    landed = lane.receive_buffer(sequence, low, high, into)
                    if landed >= _LANDED:
                        seq_in[source] = (sequence + 1) & _LOW
                        size = landed - _LANDED
                        if size > lane.payload_limit:  # a rendezvous the lane read itself
                            owed = lane.owed_fin()
                            if owed:
                                fin = proto.FIN_MSG.pack(proto.FIN, proto.STATUS_OK, owed)
                                self._control_to(source, fin)
                        return Status(source, tag, size) if status else size
                    if landed != _OTHER:
                        lane.check(landed)
                        break
                    lane.hand_on()
                    others += 1
                    if others == _LANE_ROUNDS:
                        break
            finally:
                lock.release()
        request = self.irecv(source, tag, buf)
        received = request.wait(timeout)
        if not status:
            return received
        result = request.status
        assert result is not None  # finished
        return result

    def _set_lane_spin(self, seconds: float, yielding: bool = False) -> None:
        for lane in self._lanes.values():
            lane.set_spin(seconds, yielding)


__all__ = ["LANE_SPIN", "LARGE", "Blocking", "Lane"]
