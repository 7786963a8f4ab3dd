"""The tcp module: a listening socket, one connection per peer, emulated put/get.

Get is a request frame answered by the owner of the memory, which streams
the registered range back from where it lies (no staging copy); the
requester receives it straight into its destination. Large responses use
``MSG_ZEROCOPY`` when enabled.
"""

from __future__ import annotations

import ctypes
import itertools
import os
import select
import socket
import struct
import time
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING

from attrs import define, frozen

from ..._public import public
from ..._records import FrozenValue, Record
from .._interface import (
    BtlError,
    Buffer,
    Completion,
    Endpoint,
    Limits,
    MemoryHandle,
    ModexError,
    PeerFailed,
    Placement,
    Proc,
)
from ..base import ModuleBase, NoPinBackend, Registrations
from . import _wire as wire
from ._connection import STREAM_MIN, Connection, Outgoing
from ._interfaces import Interface

if TYPE_CHECKING:
    from structlog.typing import FilteringBoundLogger


@frozen(eq=False, repr=False)
class TcpEndpoint(FrozenValue):
    rank: int


@define(eq=False, repr=False)
class _PendingGet(Record):
    target: memoryview
    callback: Completion
    received: int = 0


def memory_at(address: int, size: int) -> memoryview:
    return memoryview((ctypes.c_char * size).from_address(address)).cast("B")


@frozen(eq=False, repr=False)
class TcpSettings(FrozenValue):
    interfaces: tuple[Interface, ...]
    zerocopy: str  # "true" | "false" | "auto"
    zerocopy_threshold: int
    connect_timeout: float
    bulk_chunk: int
    leave_pinned: bool
    #: (idle, interval, probes) in seconds, seconds, probes; None: no keepalive.
    keepalive: tuple[int, ...] | None = None


@public
class TcpModule(ModuleBase):
    def __init__(self, limits: Limits, settings: TcpSettings, log: FilteringBoundLogger) -> None:
        super().__init__("tcp", limits, log)
        self.settings = settings
        self._nonce = os.urandom(8)
        self._listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self._listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        bind_to = settings.interfaces[0].address if len(settings.interfaces) == 1 else "0.0.0.0"
        self._listener.bind((bind_to, 0))
        self._listener.listen(256)
        self._port = self._listener.getsockname()[1]
        self._connections: dict[int, Connection] = {}
        self._endpoints: dict[int, TcpEndpoint] = {}
        #: Large active messages received straight into their receiver's memory,
        #: and those staged in a buffer of their own (for reports and tests).
        self.streams_placed = 0
        self.streams_staged = 0
        self._gets: dict[int, _PendingGet] = {}
        self._puts: dict[int, Completion] = {}
        self._ids = itertools.count(1)
        self._registrations = Registrations(
            "tcp", NoPinBackend(), cached=settings.leave_pinned, log=log
        )
        self._me = -1

    # -- modex and connections ---------------------------------------------

    def address(self) -> bytes:
        hosts = tuple(i.address for i in self.settings.interfaces)
        return wire.pack_address(wire.TcpAddress(self._nonce, self._port, hosts))

    def add_procs(self, procs: Sequence[Proc]) -> list[Endpoint | None]:
        me = next((p for p in procs if p.local), None)
        if me is None:
            raise BtlError("btl tcp: add_procs was not given this process")
        self._me = me.rank
        peers = {
            p.rank: (p, wire.unpack_address(p.rank, p.address))
            for p in procs
            if not p.local and p.address is not None
        }
        deadline = time.monotonic() + self.settings.connect_timeout
        for rank, (proc, address) in sorted(peers.items()):
            if rank < self._me and rank not in self._connections:
                self._connect(proc, address, deadline)
        expected = {rank for rank in peers if rank > self._me and rank not in self._connections}
        self._accept(expected, deadline)
        endpoints: list[Endpoint | None] = []
        for proc in procs:
            if proc.rank in self._connections:
                endpoint = self._endpoints.setdefault(proc.rank, TcpEndpoint(proc.rank))
                endpoints.append(endpoint)
            else:
                endpoints.append(None)
        return endpoints

    def _candidates(self, proc: Proc, address: wire.TcpAddress, local_host: bool) -> list[str]:
        hosts = list(address.hosts)
        loopback = [h for h in hosts if h.startswith("127.")]
        others = [h for h in hosts if not h.startswith("127.")]
        return loopback + others if local_host else others

    def _connect(self, proc: Proc, address: wire.TcpAddress, deadline: float) -> None:
        from ..base import host_id

        errors: list[str] = []
        for host in self._candidates(proc, address, proc.host == host_id()):
            sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            try:
                sock.settimeout(max(0.1, deadline - time.monotonic()))
                sock.connect((host, address.port))
                sock.sendall(wire.HELLO.pack(wire.HELLO_MAGIC, self._me, address.nonce))
            except OSError as exc:
                sock.close()
                errors.append(f"{host}:{address.port}: {exc}")
                continue
            self._adopt(proc.rank, sock)
            return
        raise BtlError(
            f"btl tcp: rank {self._me} cannot connect to rank {proc.rank} "
            f"({'; '.join(errors) or 'no usable address'}); check btl_tcp_if_include/exclude"
        )

    def _accept(self, expected: set[int], deadline: float) -> None:
        self._listener.settimeout(None)
        while expected:
            remaining = deadline - time.monotonic()
            readable, _, _ = select.select([self._listener], [], [], max(0.0, remaining))
            if not readable:
                raise BtlError(
                    f"btl tcp: rank {self._me} was never contacted by rank(s) "
                    f"{', '.join(map(str, sorted(expected)))} within "
                    f"{self.settings.connect_timeout:g} s (pmca_base_modex_timeout)"
                )
            sock, peer = self._listener.accept()
            try:
                sock.settimeout(max(0.1, deadline - time.monotonic()))
                hello = _recv_exactly(sock, wire.HELLO.size)
                magic, rank, nonce = wire.HELLO.unpack(hello)
            except (OSError, struct.error) as exc:
                sock.close()
                self.log.warning("rejected a connection", peer=peer, why=repr(exc))
                continue
            if magic != wire.HELLO_MAGIC or nonce != self._nonce or rank not in expected:
                sock.close()
                self.log.warning("rejected a foreign connection", peer=peer, rank=rank)
                continue
            expected.discard(rank)
            self._adopt(rank, sock)

    def _adopt(self, rank: int, sock: socket.socket) -> None:
        loopback = sock.getpeername()[0].startswith("127.")
        if self.settings.keepalive is not None:
            # No TCP_USER_TIMEOUT: it also aborts a connection whose peer, alive, just
            # does not read for that long (a zero window), which a computing rank may do.
            idle, interval, probes = self.settings.keepalive
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_KEEPALIVE, 1)
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_KEEPIDLE, idle)
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_KEEPINTVL, interval)
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_KEEPCNT, probes)
        wanted = self.settings.zerocopy == "true" or (
            self.settings.zerocopy == "auto" and not loopback
        )
        self._connections[rank] = Connection(
            self,
            rank,
            sock,
            zerocopy=wanted,
            bulk_chunk=self.settings.bulk_chunk,
            pace_reads=loopback,
        )

    def del_procs(self, endpoints: Sequence[Endpoint]) -> None:
        for endpoint in endpoints:
            connection = self._connections.pop(endpoint.rank, None)
            self._endpoints.pop(endpoint.rank, None)
            if connection is not None:
                connection.flush()
                connection.close()

    def _connection(self, endpoint: Endpoint) -> Connection:
        connection = self._connections.get(endpoint.rank)
        if connection is None:
            raise PeerFailed(f"btl tcp: no connection to rank {endpoint.rank}", rank=endpoint.rank)
        return connection

    # -- active messages ---------------------------------------------------

    def sendi(self, endpoint: Endpoint, tag: int, parts: Sequence[Buffer]) -> bool:
        connection = self._connection(endpoint)
        views = [memoryview(p).cast("B") for p in parts]
        total = sum(v.nbytes for v in views)
        if total > STREAM_MIN:
            return False  # a large body goes out with send(), from where it lies
        header = memoryview(wire.FRAME.pack(wire.AM, tag, total, 0))
        if connection.queue:
            connection.push(Outgoing([header, memoryview(b"".join(views))], None))
            return True
        outgoing = Outgoing([header, *views], None)
        connection.push(outgoing)
        if connection.queue and connection.queue[-1] is outgoing:
            # Not all of it went out: keep a private copy of the rest.
            outgoing.buffers = [memoryview(b"".join(outgoing.buffers))]
        return True

    def send(
        self,
        endpoint: Endpoint,
        tag: int,
        parts: Sequence[Buffer],
        callback: Completion | None = None,
    ) -> None:
        connection = self._connection(endpoint)
        views = [memoryview(p).cast("B") for p in parts]
        total = sum(v.nbytes for v in views)
        if total > self.limits.max_send_size:
            raise BtlError(f"btl tcp: send of {total} bytes exceeds btl_tcp_max_send_size")
        header = memoryview(wire.FRAME.pack(wire.AM, tag, total, 0))
        connection.push(Outgoing([header, *views], callback))

    # -- registration and RDMA ---------------------------------------------

    def register_mem(self, endpoint: Endpoint | None, base: int, size: int) -> MemoryHandle:
        return self._registrations.register(
            base, size, lambda key, b, s: wire.HANDLE.pack(self._nonce, key, b, s)
        )

    def deregister_mem(self, handle: MemoryHandle) -> None:
        self._settle_zerocopy()
        self._registrations.deregister(handle)

    def _settle_zerocopy(self) -> None:
        """Wait until the kernel no longer reads zero-copy pages (bounded)."""
        deadline = time.monotonic() + 5.0
        for connection in self._connections.values():
            while connection.zerocopy_pending and time.monotonic() < deadline:
                connection.reap_zerocopy()
                if connection.zerocopy_pending:
                    select.select([connection.fd], [], [], 0.001)

    def get(
        self,
        endpoint: Endpoint,
        local: memoryview,
        local_handle: MemoryHandle | None,
        remote_address: int,
        remote_handle: bytes,
        callback: Completion,
    ) -> None:
        connection = self._connection(endpoint)
        key = self._remote_key(endpoint.rank, remote_handle)
        request = next(self._ids)
        target = local.cast("B")
        self._gets[request] = _PendingGet(target, callback)
        body = wire.GET_REQUEST.pack(key, remote_address, target.nbytes)
        frame = wire.FRAME.pack(wire.GET_REQ, 0, len(body), request)
        connection.push(Outgoing([memoryview(frame + body)], None))

    def put(
        self,
        endpoint: Endpoint,
        local: memoryview,
        local_handle: MemoryHandle | None,
        remote_address: int,
        remote_handle: bytes,
        callback: Completion,
    ) -> None:
        connection = self._connection(endpoint)
        key = self._remote_key(endpoint.rank, remote_handle)
        data = local.cast("B")
        if data.nbytes + wire.PUT_HEAD.size > 0xFFFFFFFF:
            raise BtlError("btl tcp: a single put is limited to 4 GiB (btl_tcp put_limit)")
        request = next(self._ids)
        self._puts[request] = callback
        head = wire.PUT_HEAD.pack(key, remote_address, request)
        frame = wire.FRAME.pack(wire.PUT, 0, len(head) + data.nbytes, 0)
        connection.push(Outgoing([memoryview(frame + head), data], None, self._zerocopy(data)))

    def _zerocopy(self, data: memoryview) -> bool:
        return data.nbytes >= self.settings.zerocopy_threshold

    def _remote_key(self, rank: int, handle: bytes) -> int:
        try:
            _nonce, key, _base, _size = wire.HANDLE.unpack(handle)
        except struct.error:
            raise BtlError(
                f"btl tcp: malformed remote handle for rank {rank}: {handle!r}"
            ) from None
        return int(key)

    # -- receive side (called by connections) -------------------------------

    def dispatch(
        self, connection: Connection, kind: int, tag: int, aux: int, body: memoryview
    ) -> None:
        if kind == wire.AM:
            self.deliver(self._endpoints[connection.rank], tag, body)
        elif kind == wire.GET_REQ:
            self._serve_get(connection, aux, body)
        elif kind in (wire.GET_ERROR, wire.PUT_ERROR):
            self._remote_failed(connection, kind, aux, bytes(body).decode(errors="replace"))
        elif kind == wire.PUT_ACK:
            callback = self._puts.pop(aux, None)
            if callback is not None:
                callback(None)

    def place(
        self, connection: Connection, tag: int, head: memoryview, length: int
    ) -> Placement | None:
        """Where a large active message from ``connection`` goes (its tag's placer)."""
        return self.placement(self._endpoints[connection.rank], tag, head, length)

    def _serve_get(self, connection: Connection, request: int, body: memoryview) -> None:
        key, address, size = wire.GET_REQUEST.unpack(body)
        try:
            self._registrations.check(key, address, size)
        except BtlError as exc:
            refusal = f"rank {self._me} refused a get from rank {connection.rank}: {exc}".encode()
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

    def _remote_failed(self, connection: Connection, kind: int, request: int, message: str) -> None:
        error = BtlError(f"btl tcp: {message}")
        if kind == wire.GET_ERROR:
            pending = self._gets.pop(request, None)
            if pending is not None:
                pending.callback(error)
        else:
            callback = self._puts.pop(request, None)
            if callback is not None:
                callback(error)

    def get_target(
        self, connection: Connection, request: int, length: int
    ) -> tuple[memoryview, Callable[[], None]]:
        pending = self._gets.get(request)
        if pending is None or pending.received + length > pending.target.nbytes:
            raise_later = PeerFailed(
                f"btl tcp: rank {connection.rank} sent data for unknown get {request}",
                rank=connection.rank,
            )
            connection.lost(raise_later)
            return memoryview(bytearray(length)), lambda: None
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
    ) -> tuple[memoryview, Callable[[], None]]:
        key, address, request = wire.PUT_HEAD.unpack(head)
        try:
            self._registrations.check(key, address, length)
            target = memory_at(address, length) if length else memoryview(bytearray(0))
            reply = wire.FRAME.pack(wire.PUT_ACK, 0, 0, request)
        except BtlError as exc:
            message = str(exc).encode()
            target = memoryview(bytearray(length))  # drain the refused data
            reply = wire.FRAME.pack(wire.PUT_ERROR, 0, len(message), request) + message

        def finished() -> None:
            connection.push(Outgoing([memoryview(reply)], None))

        return target, finished

    def connection_lost(self, connection: Connection, failure: PeerFailed) -> None:
        endpoint = self._endpoints.get(connection.rank)
        if endpoint is not None:
            self.peer_lost(endpoint, failure)
        for request, pending in list(self._gets.items()):
            del self._gets[request]
            pending.callback(failure)
        for request, callback in list(self._puts.items()):
            del self._puts[request]
            callback(failure)

    # -- progress ----------------------------------------------------------

    def progress(self) -> int:
        done = 0
        for connection in list(self._connections.values()):
            if connection.closed is not None:
                continue
            done += connection.receive()
            if connection.queue:
                done += connection.flush()
            if connection.zerocopy_pending:
                connection.reap_zerocopy()
        return done

    @property
    def zerocopy_sends(self) -> int:
        """How many sends went out with MSG_ZEROCOPY on the open connections."""
        return sum(c.zerocopy_sends for c in self._connections.values())

    def wait_fds(self) -> list[int] | None:
        live = [c for c in self._connections.values() if c.closed is None]
        if any(c.queue or c.in_bulk() for c in live):
            return None  # output waits for room (or a bulk body streams): keep polling
        return [c.fd for c in live]

    def finalize(self) -> None:
        for connection in list(self._connections.values()):
            try:
                connection.flush()
            finally:
                connection.close()
        self._connections.clear()
        self._endpoints.clear()
        failure = BtlError("btl tcp was finalized with the operation in flight")
        gets, self._gets = self._gets, {}
        for pending in gets.values():
            pending.callback(failure)
        puts, self._puts = self._puts, {}
        for callback in puts.values():
            callback(failure)
        self._registrations.close()
        self._listener.close()


def _recv_exactly(sock: socket.socket, size: int) -> bytes:
    data = bytearray()
    while len(data) < size:
        chunk = sock.recv(size - len(data))
        if not chunk:
            raise ConnectionResetError("peer closed during the hello")
        data += chunk
    return bytes(data)


__all__ = ["ModexError", "TcpEndpoint", "TcpModule", "TcpSettings"]
