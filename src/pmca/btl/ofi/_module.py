"""The ofi module: one RDM endpoint, tagged active messages, RMA put/get.

Active messages are tagged sends: the 64-bit libfabric tag carries the
active-message tag and the sender's rank (``am_tag << 32 | rank``), and a
ring of receive buffers is kept posted with every tag bit ignored. Put and
get are ``fi_write``/``fi_read`` into the peer's ``fi_mr_regattr``
registrations, which are cached in the rcache when the memory hooks make a
cached registration safe (``mpi_leave_pinned``); the remote key travels in
:attr:`MemoryHandle.packed` with the registration's range, checked before
any transfer is posted (``_rma``).
"""

from __future__ import annotations

import functools
import struct
import time
from collections import deque
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any, cast

import attrs
from attrs import define, field, frozen

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
    Proc,
    QueuedSend,
)
from ..base import ModuleBase, Registrations
from ..base._pvars import BYTES_RECEIVED, BYTES_SENT, MESSAGES_RECEIVED, MESSAGES_SENT, SLOTS
from ..base._remote import remote_range
from . import _cdef as c
from ._fabric import Fabric, FabricError
from ._rma import RMA_CHUNK, Mr, MrBackend, Transfer

if TYPE_CHECKING:
    from structlog.typing import FilteringBoundLogger

#: Modex entry: version, provider name, endpoint name.
_ADDRESS = struct.Struct("<BB H")
_ADDRESS_VERSION = 1
_RANK_BITS = 32
_RANK_MASK = (1 << _RANK_BITS) - 1
_ALL_TAG_BITS = (1 << 64) - 1
#: How long finalize keeps progressing while sends or RMA are in flight. A
#: provider that makes its transfers reliable in software (``udp;ofi_rxd``)
#: retransmits a lost packet only from this process's progress calls: a
#: message posted just before finalize, a protocol's last FIN say, is lost
#: if the endpoint closes first, and the peer waits for it forever.
FLUSH_SECONDS = 2.0


@frozen
class OfiEndpoint:
    rank: int
    fi_addr: int
    #: The peer's counters (the module's list for this rank): counted here,
    #: where sends and receives already hold the endpoint.
    traffic: list[int] = field(eq=False, repr=False, factory=lambda: [0] * SLOTS)


@frozen
class OfiSettings:
    recv_buffers: int
    cq_batch: int
    #: Whether registrations may stay cached (asked at the first registration,
    #: once the memory hooks this component's selection activates are in).
    leave_pinned: Callable[[], tuple[bool, str]]


@define(eq=False)
class _Operation:
    """One posted libfabric operation and what to do when it completes."""

    kind: str
    context: Any
    buffer: Any = None
    on_done: Callable[[BaseException | None], None] | None = None


@define(eq=False)
class _Backlogged:
    """A send the provider refused for now (``-FI_EAGAIN``): its parts, not a copy."""

    endpoint: Endpoint
    tag: int
    parts: Sequence[Buffer]
    callback: Completion | None


class OfiModule(ModuleBase):
    #: Active messages are counted on the endpoint's list of the peer's counters.
    counts_own_sends = True

    def __init__(
        self,
        limits: Limits,
        fabric: Fabric,
        settings: OfiSettings,
        log: FilteringBoundLogger,
    ) -> None:
        super().__init__("ofi", limits, log)
        self.fabric = fabric
        self.ffi = fabric.ffi
        self.provider = fabric.provider
        self.settings = settings
        mr_mode = int(fabric.info.domain_attr.mr_mode)
        self._virtual_addresses = bool(mr_mode & c.FI_MR_VIRT_ADDR)
        self.cq = fabric.open_cq(max(1024, settings.recv_buffers * 4))
        self.av = fabric.open_av(64)
        self.ep = fabric.open_endpoint(self.av, self.cq)
        self._name = fabric.name_of(self.ep)
        self._entries = self.ffi.new("struct fi_cq_tagged_entry[]", settings.cq_batch)
        #: Completions read from the CQ and not yet handled, oldest first. A
        #: completion callback can progress again (a send that meets FI_EAGAIN
        #: does): that inner call continues with these, in order, instead of
        #: reading past them, and a callback that raises loses none of them.
        self._completions: deque[tuple[Any, int, int, BaseException | None]] = deque()
        #: Send copies are overwritten whole: cffi need not zero them first.
        self._uncleared = self.ffi.new_allocator(should_clear_after_alloc=False)
        self._error = self.ffi.new("struct fi_cq_err_entry *")
        self._operations: dict[int, _Operation] = {}
        #: Sends waiting for room in the provider's transmit queue, oldest first.
        self._backlog: deque[_Backlogged] = deque()
        self._posting = False
        self._endpoints: dict[int, OfiEndpoint] = {}
        self._by_rank: dict[int, OfiEndpoint] = {}
        self._me = -1
        self.backend = MrBackend(fabric)
        self._registrations: Registrations | None = None
        self._receiving = True
        for _ in range(settings.recv_buffers):
            self._post_recv(self.ffi.new("char[]", limits.max_send_size))

    # -- operations bookkeeping ----------------------------------------------

    def _new_operation(self, kind: str, buffer: Any = None, on_done: Any = None) -> _Operation:
        context = self.ffi.new("void *[8]")  # room for FI_CONTEXT2
        operation = _Operation(kind, context, buffer, on_done)
        self._operations[int(self.ffi.cast("uintptr_t", context))] = operation
        return operation

    def _forget(self, operation: _Operation) -> None:
        self._operations.pop(int(self.ffi.cast("uintptr_t", operation.context)), None)

    def _post(self, operation: _Operation, call: Callable[[], int], what: str) -> bool:
        """Post until accepted; ``False`` (and forgotten) on ``-FI_EAGAIN`` after progress."""
        code = call()
        if code == -c.FI_EAGAIN:
            self.progress()
            code = call()
        if code == -c.FI_EAGAIN:
            self._forget(operation)
            return False
        if code < 0:
            self._forget(operation)
            raise FabricError(
                f"btl ofi ({self.provider}): {what}: {self.fabric.fi.strerror(code)}", code=code
            )
        return True

    def _post_recv(self, buffer: Any) -> None:
        operation = self._new_operation("recv", buffer)
        size = len(buffer)
        ok = self._post(
            operation,
            lambda: self.ep.tagged.recv(
                self.ep,
                buffer,
                size,
                self.ffi.NULL,
                c.FI_ADDR_UNSPEC,
                0,
                _ALL_TAG_BITS,
                operation.context,
            ),
            "fi_trecv",
        )
        if not ok:
            raise BtlError(f"btl ofi ({self.provider}): cannot post a receive buffer")

    # -- modex -----------------------------------------------------------------

    def address(self) -> bytes:
        provider = self.provider.encode()
        header = _ADDRESS.pack(_ADDRESS_VERSION, len(provider), len(self._name))
        return header + provider + self._name

    def _parse(self, proc: Proc) -> bytes | None:
        data = proc.address
        if data is None:
            return None
        try:
            version, plen, nlen = _ADDRESS.unpack_from(data)
        except struct.error as exc:
            raise ModexError(f"btl ofi: rank {proc.rank} published a malformed address") from exc
        if version != _ADDRESS_VERSION or len(data) != _ADDRESS.size + plen + nlen:
            raise ModexError(
                f"btl ofi: rank {proc.rank} published an address of version {version} "
                f"({len(data)} bytes); this pmca speaks version {_ADDRESS_VERSION}"
            )
        provider = data[_ADDRESS.size : _ADDRESS.size + plen].decode(errors="replace")
        if provider != self.provider:
            self.log.info(
                "peer uses another provider: unreachable",
                rank=proc.rank,
                theirs=provider,
                ours=self.provider,
            )
            return None
        return data[_ADDRESS.size + plen :]

    def add_procs(self, procs: Sequence[Proc]) -> list[Endpoint | None]:
        me = next((p for p in procs if p.local), None)
        if me is None:
            raise BtlError("btl ofi: add_procs was not given this process")
        self._me = me.rank
        endpoints: list[Endpoint | None] = []
        for proc in procs:
            name = self._parse(proc)
            if name is None:
                endpoints.append(None)
                continue
            existing = self._by_rank.get(proc.rank)
            if existing is None:
                fi_addr = self.ffi.new("fi_addr_t *")
                inserted = self.av.ops.insert(self.av, name, 1, fi_addr, 0, self.ffi.NULL)
                if inserted != 1:
                    raise BtlError(
                        f"btl ofi ({self.provider}): fi_av_insert of rank {proc.rank} failed "
                        f"({self.fabric.fi.strerror(inserted) if inserted < 0 else inserted})"
                    )
                existing = OfiEndpoint(proc.rank, int(fi_addr[0]), self.peer_traffic(proc.rank))
                self._by_rank[proc.rank] = existing
            endpoints.append(existing)
        return endpoints

    def del_procs(self, endpoints: Sequence[Endpoint]) -> None:
        for endpoint in endpoints:
            self._by_rank.pop(endpoint.rank, None)

    def endpoint(self, rank: int) -> OfiEndpoint | None:
        """The endpoint of ``rank`` (this process's own included), once add_procs ran."""
        return self._by_rank.get(rank)

    def _endpoint(self, endpoint: Endpoint) -> OfiEndpoint:
        known = self._by_rank.get(endpoint.rank)
        if known is None:
            raise PeerFailed(
                f"btl ofi ({self.provider}): rank {endpoint.rank} is not reachable",
                rank=endpoint.rank,
            )
        return known

    # -- active messages ---------------------------------------------------------

    def _pack(self, parts: Sequence[Buffer]) -> Any:
        views = [memoryview(p).cast("B") for p in parts]
        total = sum(v.nbytes for v in views)
        if total > self.limits.max_send_size:
            raise BtlError(
                f"btl ofi: {total}-byte active message exceeds btl_ofi_max_send_size "
                f"({self.limits.max_send_size})"
            )
        buffer = self._uncleared("char[]", max(total, 1))
        offset = 0
        for view in views:
            self.ffi.memmove(buffer + offset, view, view.nbytes)
            offset += view.nbytes
        return buffer, total

    def _send(self, endpoint: Endpoint, tag: int, parts: Sequence[Buffer], done: Any) -> bool:
        peer = self._endpoint(endpoint)
        buffer, total = self._pack(parts)
        operation = self._new_operation("send", buffer, done)
        wire_tag = (tag << _RANK_BITS) | (self._me & _RANK_MASK)
        posted = self._post(
            operation,
            lambda: self.ep.tagged.send(
                self.ep, buffer, total, self.ffi.NULL, peer.fi_addr, wire_tag, operation.context
            ),
            f"fi_tsend to rank {peer.rank}",
        )
        if posted:
            counts = peer.traffic
            counts[MESSAGES_SENT] += 1
            counts[BYTES_SENT] += total
        return posted

    def sendi(self, endpoint: Endpoint, tag: int, parts: Sequence[Buffer]) -> bool:
        if self._backlog:
            return False  # keep order behind what waits for the provider
        return self._send(endpoint, tag, parts, None)

    def send(
        self,
        endpoint: Endpoint,
        tag: int,
        parts: Sequence[Buffer],
        callback: Completion | None = None,
    ) -> None:
        # The provider's transmit queue is the bound: what it refuses waits here,
        # in place (the callback runs only after its copy completes), and
        # progress posts it once the provider has room.
        if self._backlog or not self._send(endpoint, tag, parts, callback):
            self._endpoint(endpoint)
            self._backlog.append(_Backlogged(endpoint, tag, parts, callback))

    def queued_sends(self, rank: int | None = None) -> list[QueuedSend]:
        """Active messages the provider has not taken yet (to ``rank``, or all)."""
        found: list[QueuedSend] = []
        for item in self._backlog:
            if rank is None or item.endpoint.rank == rank:
                data = b"".join(memoryview(p).cast("B") for p in item.parts)
                found.append(
                    QueuedSend(
                        item.endpoint.rank,
                        item.tag,
                        len(data),
                        data[:PLACEMENT_HEAD],
                        item.callback is None,
                    )
                )
        return found

    def drop_queued(self, rank: int) -> list[QueuedSend]:
        """Take what waits for the provider to ``rank`` off for good (pending sends
        fail); the active messages dropped. A posted send is the provider's."""
        found = self.queued_sends(rank)
        backlog = self._backlog  # in place: a post under way holds this deque
        dropped = [item for item in backlog if item.endpoint.rank == rank]
        if dropped:
            kept = [item for item in backlog if item.endpoint.rank != rank]
            backlog.clear()
            backlog.extend(kept)
            failure = self.dropped(rank)
            for item in dropped:
                if item.callback is not None:
                    item.callback(failure)
        return found

    def _post_backlog(self) -> int:
        """Post what waits for the provider, in order, while it takes them."""
        backlog = self._backlog
        posted = 0
        self._posting = True
        try:
            while backlog:
                item = backlog[0]
                try:
                    if not self._send(item.endpoint, item.tag, item.parts, item.callback):
                        break
                except BtlError as exc:  # the peer went away meanwhile
                    backlog.popleft()
                    if item.callback is not None:
                        item.callback(exc)
                    continue
                backlog.popleft()
                posted += 1
        finally:
            self._posting = False
        return posted

    # -- registration and RMA ------------------------------------------------------

    @property
    def registrations(self) -> Registrations:
        """The registrations, in the rcache when cached registrations are safe."""
        if self._registrations is None:
            cached, why = self.settings.leave_pinned()
            self.log.debug("registration", cached=cached, why=why)
            self._registrations = Registrations("ofi", self.backend, cached=cached, log=self.log)
        return self._registrations

    def register_mem(self, endpoint: Endpoint | None, base: int, size: int) -> MemoryHandle:
        handle = self.registrations.register(base, size, lambda key, b, s: b"")
        token = cast("tuple[int, Any]", handle.token)[1]
        mr = token.handle
        assert isinstance(mr, Mr)
        return attrs.evolve(handle, packed=mr.packed())

    def deregister_mem(self, handle: MemoryHandle) -> None:
        self.registrations.deregister(handle)

    def _rma(
        self,
        kind: str,
        endpoint: Endpoint,
        local: memoryview,
        remote_address: int,
        remote_handle: bytes,
        callback: Completion,
    ) -> None:
        peer = self._endpoint(endpoint)
        size = local.nbytes
        key, base = remote_range("ofi", kind, peer.rank, remote_address, size, remote_handle)
        if size == 0:
            callback(None)
            return
        self.count_rdma(peer, size)
        pointer = self.ffi.from_buffer(local, require_writable=(kind == "get"))
        chunks = range(0, size, RMA_CHUNK)
        transfer = Transfer(callback, len(chunks))
        post = self.ep.rma.write if kind == "put" else self.ep.rma.read
        what = f"fi_{'write' if kind == 'put' else 'read'} with rank {peer.rank}"
        for offset in chunks:
            count = min(RMA_CHUNK, size - offset)
            target = remote_address + offset
            address = target if self._virtual_addresses else target - base
            data = pointer + offset
            while True:
                operation = self._new_operation(kind, pointer, transfer.done)
                call = functools.partial(
                    post,
                    self.ep,
                    data,
                    count,
                    self.ffi.NULL,
                    peer.fi_addr,
                    address,
                    key,
                    operation.context,
                )

                if self._post(operation, call, what):
                    break
                self.progress()

    def put(
        self,
        endpoint: Endpoint,
        local: memoryview,
        local_handle: MemoryHandle | None,
        remote_address: int,
        remote_handle: bytes,
        callback: Completion,
    ) -> None:
        self._rma("put", endpoint, local, remote_address, remote_handle, callback)

    def get(
        self,
        endpoint: Endpoint,
        local: memoryview,
        local_handle: MemoryHandle | None,
        remote_address: int,
        remote_handle: bytes,
        callback: Completion,
    ) -> None:
        self._rma("get", endpoint, local, remote_address, remote_handle, callback)

    # -- progress ------------------------------------------------------------------

    def progress(self) -> int:
        completed = 0
        pending, entries, batch = self._completions, self._entries, self.settings.cq_batch
        while True:
            while pending:
                self._complete(*pending.popleft())
                completed += 1
            count = self.cq.ops.read(self.cq, entries, batch)
            if count == -c.FI_EAGAIN:
                if self._backlog and not self._posting:
                    completed += self._post_backlog()
                return completed
            if count == -c.FI_EAVAIL:
                self._read_error()
                continue
            if count < 0:
                raise FabricError(
                    f"btl ofi ({self.provider}): fi_cq_read: {self.fabric.fi.strerror(count)}",
                    code=count,
                )
            for index in range(count):
                entry = entries[index]
                pending.append((entry.op_context, entry.len, entry.tag, None))

    def _read_error(self) -> None:
        code = self.cq.ops.readerr(self.cq, self._error, 0)
        if code < 0:
            return
        entry = self._error
        error = FabricError(
            f"btl ofi ({self.provider}): operation failed: {self.fabric.fi.strerror(entry.err)}",
            code=-entry.err,
        )
        self._completions.append((entry.op_context, entry.len, entry.tag, error))

    def _complete(self, context: Any, length: int, tag: int, error: BaseException | None) -> None:
        key = int(self.ffi.cast("uintptr_t", context))
        operation = self._operations.pop(key, None)
        if operation is None:
            self.log.warning("completion for an unknown operation", context=hex(key))
            return
        if operation.kind == "recv":
            self._received(operation, length, tag, error)
            return
        if operation.on_done is not None:
            operation.on_done(error)

    def _received(
        self, operation: _Operation, length: int, tag: int, error: BaseException | None
    ) -> None:
        buffer = operation.buffer
        try:
            if error is not None:
                if self._receiving:
                    self.log.warning("receive failed", error=str(error))
                return
            rank = tag & _RANK_MASK
            peer = self._by_rank.get(rank)
            if peer is None:
                self.log.warning("active message from an unknown rank; dropped", rank=rank)
                return
            data = memoryview(self.ffi.buffer(buffer, length)).cast("B")
            counts = peer.traffic
            counts[MESSAGES_RECEIVED] += 1
            counts[BYTES_RECEIVED] += length
            self.hand_over(peer, (tag >> _RANK_BITS) & 0xFF, data)
        finally:
            if self._receiving:
                self._post_recv(buffer)

    def wait_fds(self) -> list[int] | None:
        return None  # completions arrive without a descriptor: keep polling

    def _flush(self) -> None:
        """Progress until no send or RMA is in flight, for :data:`FLUSH_SECONDS` at most."""
        deadline = time.monotonic() + FLUSH_SECONDS
        while True:
            in_flight = len(self._backlog) + sum(
                op.kind != "recv" for op in self._operations.values()
            )
            if not in_flight:
                return
            if time.monotonic() > deadline:
                self.log.info("finalize with operations in flight", count=in_flight)
                return
            self.progress()

    def finalize(self) -> None:
        try:
            self._flush()
        except FabricError as exc:
            self.log.info("flush at finalize", error=str(exc))
        self._receiving = False
        for operation in list(self._operations.values()):
            if operation.kind == "recv":
                self.ep.ops.cancel(self.fabric.fid(self.ep), operation.context)
        try:
            self.progress()
        except FabricError as exc:
            self.log.info("progress at finalize", error=str(exc))
        if self._registrations is not None:
            self._registrations.close()  # before the domain that pinned them closes
        for operation in list(self._operations.values()):
            if operation.on_done is not None:
                operation.on_done(BtlError(f"btl ofi ({self.provider}): finalized"))
        self._operations.clear()
        self._completions.clear()
        backlog, self._backlog = self._backlog, deque()
        for item in backlog:
            if item.callback is not None:
                item.callback(BtlError(f"btl ofi ({self.provider}): finalized"))
        for failure in self.fabric.close():
            self.log.warning("close failed", failure=failure)


__all__ = ["RMA_CHUNK", "OfiEndpoint", "OfiModule", "OfiSettings"]
