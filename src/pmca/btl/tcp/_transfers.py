"""A rail's gets and puts: which are in flight, with whom, and their answers.

A get is a request frame answered by the owner of the memory, which streams
the registered range back from where it lies (no staging copy); the
requester receives it straight into its destination. A put carries its data
behind a header naming where it goes, and is acknowledged. Large pieces
use ``MSG_ZEROCOPY`` when enabled.

Each transfer in flight remembers the peer it was asked of: only that
peer's data and answers count for it (another peer sending data for it
loses its connection as faulty; its errors and acknowledgements are
ignored), and only that peer's lost connection fails it.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable

from attrs import define

from ..._records import Record
from .._interface import BtlError, Completion, PeerFailed
from ..base import Registrations
from ..base._remote import memory_at
from . import _wire as wire
from ._connection import Connection
from ._records import Outgoing

__all__ = ["Transfers"]


@define(eq=False, repr=False)
class _PendingGet(Record):
    rank: int
    target: memoryview
    callback: Completion
    received: int = 0


@define(eq=False, repr=False)
class _PendingPut(Record):
    rank: int
    callback: Completion


class Transfers:
    """The gets and puts of one rail, by request id.

    ``zerocopy(piece)`` says whether a piece is sent with ``MSG_ZEROCOPY``.
    """

    def __init__(
        self, registrations: Registrations, zerocopy: Callable[[memoryview], bool]
    ) -> None:
        self.registrations = registrations
        self._zerocopy = zerocopy
        self._gets: dict[int, _PendingGet] = {}
        self._puts: dict[int, _PendingPut] = {}
        self._ids = itertools.count(1)
        #: This process's rank (for refusals), once known.
        self.me = -1

    # -- asking ----------------------------------------------------------------

    def get(
        self,
        connection: Connection,
        key: int,
        remote_address: int,
        target: memoryview,
        callback: Completion,
    ) -> None:
        """Ask ``connection``'s peer for ``target.nbytes`` at ``remote_address``."""
        request = next(self._ids)
        self._gets[request] = _PendingGet(connection.rank, target, callback)
        body = wire.GET_REQUEST.pack(key, remote_address, target.nbytes)
        frame = wire.FRAME.pack(wire.GET_REQ, 0, len(body), request)
        try:
            connection.push(Outgoing([memoryview(frame + body)], None))
        except BaseException:
            # Refused (the peer is lost): nothing keeps the caller's buffer.
            self._gets.pop(request, None)
            raise

    def put(
        self,
        connection: Connection,
        key: int,
        remote_address: int,
        data: memoryview,
        callback: Completion,
    ) -> None:
        """Write ``data`` to ``remote_address`` of ``connection``'s peer."""
        request = next(self._ids)
        self._puts[request] = _PendingPut(connection.rank, callback)
        head = wire.PUT_HEAD.pack(key, remote_address, request)
        frame = wire.FRAME.pack(wire.PUT, 0, len(head) + data.nbytes, 0)
        try:
            connection.push(Outgoing([memoryview(frame + head), data], None, self._zerocopy(data)))
        except BaseException:
            self._puts.pop(request, None)
            raise

    # -- answering and answers ---------------------------------------------------

    def serve_get(self, connection: Connection, request: int, body: memoryview) -> None:
        """Stream the range a peer's get asks for, or refuse it saying why."""
        if connection.writes_ended:
            return  # finalize gave up on this peer: its get fails when the connection ends
        key, address, size = wire.GET_REQUEST.unpack(body)
        try:
            self.registrations.check(key, address, size)
        except BtlError as exc:
            refusal = f"rank {self.me} refused a get from rank {connection.rank}: {exc}".encode()
            frame = wire.FRAME.pack(wire.GET_ERROR, 0, len(refusal), request)
            connection.push(Outgoing([memoryview(frame + refusal)], None))
            return
        source = memory_at(address, size) if size else memoryview(b"")
        offset = 0
        while True:
            chunk = min(size - offset, wire.MAX_CHUNK)
            head = memoryview(wire.FRAME.pack(wire.GET_DATA, 0, chunk, request))
            piece = source[offset : offset + chunk]
            connection.push(Outgoing([head, piece], None, self._zerocopy(piece)))
            offset += chunk
            if offset >= size:
                break

    def refused(self, connection: Connection, kind: int, request: int, message: str) -> None:
        """A peer's GET_ERROR or PUT_ERROR: the transfer it answers fails with it."""
        error = BtlError(f"btl tcp: {message}")
        if kind == wire.GET_ERROR:
            pending = self._gets.get(request)
            if pending is not None and pending.rank == connection.rank:
                del self._gets[request]
                pending.callback(error)
        else:
            put = self._take_put(connection, request)
            if put is not None:
                put.callback(error)

    def acknowledged(self, connection: Connection, request: int) -> None:
        """A peer's PUT_ACK: the put it answers is done."""
        put = self._take_put(connection, request)
        if put is not None:
            put.callback(None)

    def _take_put(self, connection: Connection, request: int) -> _PendingPut | None:
        """The put ``request`` that ``connection``'s peer answers (another peer's: none)."""
        put = self._puts.get(request)
        if put is None or put.rank != connection.rank:
            return None
        del self._puts[request]
        return put

    def get_target(
        self, connection: Connection, request: int, length: int
    ) -> tuple[memoryview, Callable[[], None]]:
        """Where ``length`` bytes of get data from ``connection`` go, and what ends them."""
        pending = self._gets.get(request)
        if (
            pending is None
            or pending.rank != connection.rank
            or pending.received + length > pending.target.nbytes
        ):
            raise_later = PeerFailed(
                f"btl tcp: rank {connection.rank} sent data for unknown get {request}",
                rank=connection.rank,
            )
            connection.lost(raise_later)
            return memoryview(b""), lambda: None  # lost: nothing more is read
        target = pending.target[pending.received : pending.received + length]
        pending.received += length

        def finished() -> None:
            if pending.received == pending.target.nbytes:
                self._gets.pop(request, None)
                pending.callback(None)

        if length == 0:
            finished()
            return memoryview(bytearray(0)), lambda: None
        return target, finished

    def put_target(
        self, connection: Connection, head: bytes, length: int
    ) -> tuple[memoryview | None, Callable[[], None]]:
        """Where a peer's put of ``length`` bytes goes (``None``: refused, its data
        is dropped), and the answer once it is in."""
        key, address, request = wire.PUT_HEAD.unpack(head)
        target: memoryview | None
        try:
            self.registrations.check(key, address, length)
            target = memory_at(address, length) if length else memoryview(bytearray(0))
            reply = wire.FRAME.pack(wire.PUT_ACK, 0, 0, request)
        except BtlError as exc:
            message = str(exc).encode()
            target = None
            reply = wire.FRAME.pack(wire.PUT_ERROR, 0, len(message), request) + message

        def finished() -> None:
            connection.push(Outgoing([memoryview(reply)], None))

        return target, finished

    def awaits(self, rank: int) -> bool:
        """Whether a get or put asked of ``rank`` waits for its data or answer."""
        return any(p.rank == rank for p in self._gets.values()) or any(
            p.rank == rank for p in self._puts.values()
        )

    # -- ends --------------------------------------------------------------------

    def peer_lost(self, rank: int, failure: BaseException) -> None:
        """Fail what was asked of ``rank`` (another peer's transfers go on)."""
        for request, pending in list(self._gets.items()):
            if pending.rank == rank:
                del self._gets[request]
                pending.callback(failure)
        for request, put in list(self._puts.items()):
            if put.rank == rank:
                del self._puts[request]
                put.callback(failure)

    def fail_all(self, failure: BaseException) -> None:
        """Fail every transfer still in flight (the rail is finalized)."""
        gets, self._gets = self._gets, {}
        for pending in gets.values():
            pending.callback(failure)
        puts, self._puts = self._puts, {}
        for put in puts.values():
            put.callback(failure)
