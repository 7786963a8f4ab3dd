"""The tcp module: a listening socket, one connection per peer, emulated put/get.

Each module (a rail) listens on its interface's own address, never the
wildcard; during init the listener takes only connections whose hello proves
an expected rank, reading every connection at once (``_listener``). Gets
and puts travel on the connections as frames of their own (``_transfers``).
"""

from __future__ import annotations

import select
import socket
import struct
import time
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, cast

from attrs import field, frozen

from ..._public import public
from ..._records import FrozenValue
from .._interface import (
    PLACEMENT_HEAD,
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
    QueuedSend,
)
from ..base import ModuleBase, NoPinBackend, Registrations, host_name
from ..base._pvars import BYTES_RECEIVED, BYTES_SENT, MESSAGES_RECEIVED, MESSAGES_SENT
from . import _wire as wire
from ._bulk import STREAM_MIN
from ._connection import QUEUED_COST, Connection
from ._flow import FlowControl
from ._group import RailGroup
from ._handshake import connect, keep_alive
from ._interfaces import Interface
from ._lane import TcpLane
from ._listener import HelloRules, accept, listen
from ._polling import Polling
from ._rails import Pairing
from ._records import Outgoing
from ._transfers import Transfers
from ._wakeup import Wakeup
from ._writes import _IOV_MAX
from ._zerocopy import ZeroCopyStats

if TYPE_CHECKING:
    from structlog.typing import FilteringBoundLogger

    from .._holding import Holding


#: Seconds a deregistration waits for the kernel's zero-copy completions before
#: a log line says it still waits (it never stops waiting; see ``_settle_zerocopy``).
SETTLE_PATIENCE = 5.0
_FRAME_PACK = wire.FRAME.pack
_FRAME_SIZE = wire.FRAME.size


@frozen(eq=False, repr=False)
class TcpEndpoint(FrozenValue):
    rank: int


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
    #: ``btl_tcp_send_queue_limit``: what copied sends may hold per peer.
    send_queue_limit: int = 0
    #: ``btl_tcp_recv_queue_limit``: what the receiver may hold of a peer's
    #: unexpected messages before its socket is not read (0: no bound).
    recv_queue_limit: int = 0
    #: How the listener treats connections until their hello arrives.
    hello: HelloRules = field(factory=HelloRules)


@public
class TcpModule(ModuleBase):
    #: Active messages are counted on the connection's list of the peer's
    #: counters, where send/sendi and dispatch already hold the connection.
    counts_own_sends = True

    def __init__(
        self,
        limits: Limits,
        settings: TcpSettings,
        log: FilteringBoundLogger,
        interface: Interface | None = None,
        group: RailGroup | None = None,
    ) -> None:
        super().__init__("tcp", limits, log)
        self.settings = settings
        self.interface = interface if interface is not None else settings.interfaces[0]
        self.group: RailGroup = group if group is not None else RailGroup(log)
        self.group.rails.append(self)
        #: The other rails of this process, for the framework (set on the first rail only).
        self.rails: tuple[TcpModule, ...] = ()
        self._nonce = self.group.nonce
        self._listener = listen(self.interface)
        self.port = self._listener.getsockname()[1]
        self._connections: dict[int, Connection] = {}
        self._endpoints: dict[int, TcpEndpoint] = {}
        self._registrations = Registrations(
            "tcp", NoPinBackend(), cached=settings.leave_pinned, log=log
        )
        self._transfers = Transfers(self._registrations, self._zerocopy)
        self._me = -1
        #: Zero-copy figures of connections already closed.
        self._closed_zerocopy = ZeroCopyStats()
        self._polling = Polling(settings.keepalive)
        #: Per peer rank: the host name its modex entry gave (for error messages).
        self._hosts: dict[int, str] = {}
        self._wakeup = Wakeup()
        self._flow = FlowControl(settings.recv_queue_limit, self._polling, self._transfers, log)
        #: The message layer's held bytes per peer, once it is watched with a limit.
        self._held: list[int] | None = None

    # -- flow control (see ``_flow``) -----------------------------------------

    def watch_holding(self, holding: Holding) -> None:
        """Bound what ``holding`` keeps per peer by ``btl_tcp_recv_queue_limit``."""
        if self.settings.recv_queue_limit:
            self._flow.holding = holding
            self._held = cast("list[int]", holding.held)

    def holding_eased(self, rank: int) -> None:
        """Read a peer's socket again if it was stopped and may be read now."""
        if self._flow.paused:
            self._flow.eased(rank)

    # -- modex and connections ---------------------------------------------

    def address(self) -> bytes:
        return self.group.address()

    def add_procs(self, procs: Sequence[Proc]) -> list[Endpoint | None]:
        me = next((p for p in procs if p.local), None)
        if me is None:
            raise BtlError("btl tcp: add_procs was not given this process")
        self._me = self._transfers.me = me.rank
        self._hosts.update((p.rank, host_name(p.host)) for p in procs if p.host)
        peers = {
            p.rank: (p, wire.unpack_address(p.rank, p.address))
            for p in procs
            if not p.local and p.address is not None
        }
        # The host this process published (as the bml placed it), not a fresh
        # host_id(): that reads a file, which a process out of descriptors cannot.
        here = me.host
        mine: dict[int, Pairing] = {}
        for rank, (proc, address) in peers.items():
            for pairing in self.group.pairings(proc, address, proc.host == here):
                if pairing.local.address == self.interface.address:
                    mine[rank] = pairing
        deadline = time.monotonic() + self.settings.connect_timeout
        for rank, pairing in sorted(mine.items()):
            if rank < self._me and rank not in self._connections:
                nonce = peers[rank][1].nonce
                self._adopt(rank, connect(self.interface, self._me, rank, pairing, nonce, deadline))
        expected = {
            rank: pairing
            for rank, pairing in mine.items()
            if rank > self._me and rank not in self._connections
        }
        timeout = self.settings.connect_timeout
        accept(
            self._listener,
            self.interface,
            self._me,
            self._nonce,
            expected,
            self._adopt,
            deadline,
            timeout,
            self.log,
            self.settings.hello,
        )
        endpoints: list[Endpoint | None] = []
        for proc in procs:
            if proc.rank in self._connections:
                endpoint = self._endpoints.setdefault(proc.rank, TcpEndpoint(proc.rank))
                endpoints.append(endpoint)
            else:
                endpoints.append(None)
        return endpoints

    def close_listener(self) -> None:
        """Close the listener of a rail that will never be used (its query failed)."""
        self._listener.close()

    def _adopt(self, rank: int, sock: socket.socket) -> None:
        # The rail's own address, not getpeername(): that fails (ENOTCONN) on a
        # connection its peer already reset, which must become a PeerFailed later.
        loopback = self.interface.loopback
        keep_alive(sock, self.settings.keepalive)
        wanted = self.settings.zerocopy == "true" or (
            self.settings.zerocopy == "auto" and not loopback
        )
        connection = Connection(
            self,
            rank,
            sock,
            host=self._hosts.get(rank, ""),
            zerocopy=wanted,
            zerocopy_adaptive=self.settings.zerocopy == "auto",
            bulk_chunk=self.settings.bulk_chunk,
            pace_reads=loopback,
            queue_limit=self.settings.send_queue_limit,
            traffic=self.peer_traffic(rank),
        )
        self._polling.add(connection)
        # Known only once nothing more can fail: a failed adoption's socket is
        # closed by the listener, and no registered connection may still use it.
        self._connections[rank] = connection

    def del_procs(self, endpoints: Sequence[Endpoint]) -> None:
        for endpoint in endpoints:
            connection = self._connections.pop(endpoint.rank, None)
            self._endpoints.pop(endpoint.rank, None)
            if connection is not None:
                connection.flush()
                self._retire(connection)

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
        cost = total + QUEUED_COST
        if connection.owned + cost > connection.queue_limit:
            # Back-pressure: no more copies for this peer; the caller sends in
            # place and its send completes once the socket takes the bytes.
            return False
        header = _FRAME_PACK(wire.AM, tag, total, 0)
        counts = connection.traffic
        counts[MESSAGES_SENT] += 1
        counts[BYTES_SENT] += total
        if (
            not connection.queue
            and _FRAME_SIZE + total <= connection.write_max
            and len(views) < _IOV_MAX
        ):
            # Header and body in one sendmsg, no queue entry unless the socket is full
            # (many parts go through the queue, which writes at most _IOV_MAX at once).
            buffers: list[memoryview | bytes] = [header, *views]
            sent = connection.send_now(buffers)
            if sent >= 0 and sent < _FRAME_SIZE + total:
                connection.keep_rest(buffers, sent, tag, total, cost)
            return True  # gone (or the connection failed: its peer's requests hear)
        if connection.queue:
            copy = memoryview(b"".join(views))
            connection.push(
                Outgoing([memoryview(header), copy], None, False, tag, total, copy, cost)
            )
            connection.owned += cost
            return True
        outgoing = Outgoing([memoryview(header), *views], None, False, tag, total)
        connection.push(outgoing)
        if connection.queue and connection.queue[-1] is outgoing:
            # Not all of it went out: keep a private copy of the rest.
            outgoing.buffers = [memoryview(b"".join(outgoing.buffers))]
            outgoing.head = bytes(views[0][:PLACEMENT_HEAD]) if views else b""
            outgoing.owned = cost
            connection.owned += cost
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
        counts = connection.traffic
        counts[MESSAGES_SENT] += 1
        counts[BYTES_SENT] += total
        head = views[0] if views else b""
        connection.push(Outgoing([header, *views], callback, False, tag, total, head))

    def open_lane(self, endpoint: Endpoint, am_tag: int) -> TcpLane | None:
        """The message layer's fast path to ``endpoint`` for ``am_tag`` (see :class:`TcpLane`)."""
        connection = self._connections.get(endpoint.rank)
        if connection is None or self._endpoints.get(endpoint.rank) is not endpoint:
            return None
        return TcpLane(self, connection, am_tag)

    def queued_sends(self, rank: int | None = None) -> list[QueuedSend]:
        """Active messages accepted and not yet written to the socket (to ``rank``, or all)."""
        if rank is None:
            chosen = list(self._connections.values())
        else:
            connection = self._connections.get(rank)
            chosen = [connection] if connection is not None else []
        return [queued for connection in chosen for queued in connection.queued_sends()]

    def drop_queued(self, rank: int) -> list[QueuedSend]:
        """Take what every rail queues to ``rank`` off for good (see
        ``Connection.drop_queued``)."""
        failure = self.dropped(rank)
        found: list[QueuedSend] = []
        for rail in self._group_rails():
            connection = rail._connections.get(rank)
            if connection is not None:
                found.extend(connection.drop_queued(failure))
        return found

    # -- registration and RDMA ---------------------------------------------

    def register_mem(self, endpoint: Endpoint | None, base: int, size: int) -> MemoryHandle:
        return self._registrations.register(
            base, size, lambda key, b, s: wire.HANDLE.pack(self._nonce, key, b, s)
        )

    def deregister_mem(self, handle: MemoryHandle) -> None:
        self._settle_zerocopy()
        self._registrations.deregister(handle)

    def _settle_zerocopy(self) -> None:
        """Wait until the kernel no longer reads zero-copy pages.

        Until each connection's completion notices all came, or it closed or
        failed (its buffers are then kept for good, see ``_zerocopy``): pages
        deregistered earlier may be reused while the kernel still sends them,
        and the peer would get other bytes. A peer that stops reading keeps
        them pinned; past :data:`SETTLE_PATIENCE` a log line says so, and a
        peer whose host stopped acknowledging fails as progress would fail it.
        """
        began = time.monotonic()
        said = False
        for connection in list(self._connections.values()):
            # Only errors and hang-ups: input waiting must not wake this wait (no read here).
            notices = select.poll()
            notices.register(connection.fd, 0)
            while connection.closed is None and connection.zerocopy.pending:
                connection.reap_zerocopy()
                if not connection.zerocopy.pending:
                    break
                for _fd, events in notices.poll(10):  # a completion shows as POLLERR
                    if events & (select.POLLHUP | select.POLLNVAL):
                        connection.lost(ConnectionResetError("the socket hung up"))
                self._polling.check_failed(connection)
                if not said and time.monotonic() - began > SETTLE_PATIENCE:
                    said = True
                    self.log.warning(
                        "deregistration waits for the kernel to finish zero-copy sends",
                        rank=connection.rank,
                        pending=connection.zerocopy.pending,
                        seconds=round(time.monotonic() - began, 1),
                    )

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
        target = local.cast("B")
        self._transfers.get(connection, key, remote_address, target, callback)
        self.count_rdma(endpoint, target.nbytes)

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
        self._transfers.put(connection, key, remote_address, data, callback)
        self.count_rdma(endpoint, data.nbytes)

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
            counts = connection.traffic
            counts[MESSAGES_RECEIVED] += 1
            counts[BYTES_RECEIVED] += body.nbytes
            self.hand_over(self._endpoints[connection.rank], tag, body)
            held = self._held  # (landed() inline: every message passes here)
            if held is not None and held[connection.rank] > self._flow.limit:
                self._flow.arrived(connection)
        elif kind == wire.GET_REQ:
            self._transfers.serve_get(connection, aux, body)
        elif kind in (wire.GET_ERROR, wire.PUT_ERROR):
            self._transfers.refused(connection, kind, aux, bytes(body).decode(errors="replace"))
        elif kind == wire.PUT_ACK:
            self._transfers.acknowledged(connection, aux)

    def landed(self, connection: Connection) -> None:
        """A large active message from ``connection`` was received where it was placed."""
        held = self._held
        if held is not None and held[connection.rank] > self._flow.limit:
            self._flow.arrived(connection)

    def place(
        self, connection: Connection, tag: int, head: memoryview, length: int
    ) -> Placement | None:
        """Where a large active message from ``connection`` goes (its tag's placer)."""
        return self.placement(self._endpoints[connection.rank], tag, head, length)

    def get_target(
        self, connection: Connection, request: int, length: int
    ) -> tuple[memoryview, Callable[[], None]]:
        return self._transfers.get_target(connection, request, length)

    def put_target(
        self, connection: Connection, head: bytes, length: int
    ) -> tuple[memoryview | None, Callable[[], None]]:
        return self._transfers.put_target(connection, head, length)

    def connection_lost(self, connection: Connection, failure: PeerFailed) -> None:
        self._polling.remove(connection)
        self._flow.forget(connection)
        endpoint = self._endpoints.get(connection.rank)
        if endpoint is not None:
            self.peer_lost(endpoint, failure)
        self._transfers.peer_lost(connection.rank, failure)

    # -- progress ----------------------------------------------------------

    def progress(self) -> int:
        return self._polling.progress()  # nothing when no peer is reached through it

    def progress_ready(self, ready: list[int]) -> int:
        """:meth:`progress` after a native poll found ``ready`` readable (see ``_polling``)."""
        return self._polling.progress_ready(ready)

    # Counters of every rail of this process, read from any of them.

    @property
    def streams_placed(self) -> int:
        """Large active messages received straight into their receiver's memory."""
        return self.group.streams_placed

    @streams_placed.setter
    def streams_placed(self, value: int) -> None:
        self.group.streams_placed = value

    @property
    def streams_staged(self) -> int:
        """Large active messages staged in a buffer of their own."""
        return self.group.streams_staged

    @streams_staged.setter
    def streams_staged(self, value: int) -> None:
        self.group.streams_staged = value

    def _group_rails(self) -> list[TcpModule]:
        # Every rail of a group is a TcpModule; the group itself needs only the Rail protocol.
        return cast("list[TcpModule]", self.group.rails)

    def connections(self) -> dict[int, Connection]:
        """The open connection to each peer rank, over every rail (for tools and tests)."""
        found: dict[int, Connection] = {}
        for rail in self._group_rails():
            found.update(rail._connections)
        return found

    @property
    def zerocopy_sends(self) -> int:
        """How many send calls went out with MSG_ZEROCOPY."""
        return self.zerocopy_stats().sends

    def zerocopy_stats(self) -> ZeroCopyStats:
        """Zero-copy sends, their completions and the kernel's copies, over all connections."""
        total = ZeroCopyStats()
        for rail in self._group_rails():
            total.add(rail._closed_zerocopy)
            for connection in rail._connections.values():
                total.add(connection.zerocopy.stats)
        return total

    def wait_fds(self) -> list[int] | None:
        return self._polling.wait_fds(self._wakeup)

    def spin_fds(self) -> list[int] | None:
        """The sockets a spinning wait polls natively, arming nothing (a kept list)."""
        return self._polling.spin_fds()

    def _retire(self, connection: Connection) -> None:
        """Close ``connection`` and keep its zero-copy figures."""
        self._polling.remove(connection)
        self._flow.forget(connection)
        self._closed_zerocopy.add(connection.zerocopy.stats)
        connection.close()

    def finalize(self) -> None:
        try:
            self._finalize_rail()
        finally:
            for rail in self.rails:  # the first rail answers for the others
                rail.finalize()

    def _finalize_rail(self) -> None:
        for connection in list(self._connections.values()):
            try:
                connection.flush()
            finally:
                self._retire(connection)
        self._connections.clear()
        self._endpoints.clear()
        self._transfers.fail_all(BtlError("btl tcp was finalized with the operation in flight"))
        self._registrations.close()
        self._listener.close()
        self._wakeup.close()


__all__ = ["ModexError", "TcpEndpoint", "TcpModule", "TcpSettings"]
