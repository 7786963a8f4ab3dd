"""The sm module: active messages through shared-memory FIFOs, put/get with CMA.

Each process publishes the memfd of its segment (and the write end of its
wake pipe) as ``(pid, fd)`` pairs; a peer on the same host, in the same pid
namespace, opens them with ``pidfd_getfd`` (or ``/proc/<pid>/fd/<n>``) and
maps the segment.  Sends copy into a fragment of the sender's own segment
and queue its address in the receiver's FIFO; put/get are one
``process_vm_writev``/``process_vm_readv``.  Where the kernel refuses CMA
(probed at add_procs, or met at first use) put/get are *emulated*: the
owner of the memory streams it through the FIFOs (:mod:`._emulated`).
With ``btl_sm_single_copy_mechanism=none`` the module offers no PUT/GET
and the message layer streams large messages itself.  Both are
copy-in/copy-out through the segments.

Locking: the transport's context is process-local state that one lock
serialises, together with the handling of each delivery (valid until the
next poll): :attr:`SmModule.lock`. The module's own operations take it; the
bml hands the module its lock (:meth:`SmModule.share_lock`), so p2p, which
holds the bml's lock around every call and every lane call, holds this one.
Lanes (:class:`SmLane`) are raw native calls: their callers hold the lock.
"""

from __future__ import annotations

import errno
import os
import threading
from collections import deque
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import attrs
from attrs import frozen

from ..._public import public
from ..._records import FrozenValue, Record
from .._interface import (
    PLACEMENT_HEAD,
    BtlError,
    Buffer,
    Completion,
    Endpoint,
    Flags,
    Limits,
    MemoryHandle,
    ModexError,
    PeerFailed,
    PeerFinalized,
    Proc,
    QueuedSend,
)
from ..base import ModuleBase, NoPinBackend, Registrations, host_id
from ..base._pvars import INDEX
from ..base._remote import pack_remote, remote_range
from ._address import pack_address, parse_address, pid_namespace
from ._defaults import DEFAULTS, MECHANISMS
from ._emulated import INTERNAL_TAGS, Emulation
from ._fault_reports import FaultReports
from ._lane import SmLane
from ._transport import (
    COUNT_INDEX,
    PeerClosed,
    PeerFault,
    Transport,
    TransportError,
    buffer_address,
)

if TYPE_CHECKING:
    from structlog.typing import FilteringBoundLogger

_FLAGS = {
    "cma": DEFAULTS.flags,
    # put/get through the FIFOs: still RDMA for the message layer
    "emulated": Flags.SEND | Flags.SEND_INPLACE | Flags.RDMA,
    # sends only: the message layer pipelines large messages itself
    "none": Flags.SEND | Flags.SEND_INPLACE,
}


def _limits_for(limits: Limits, mechanism: str) -> Limits:
    rdma = mechanism != "none"
    return attrs.evolve(
        limits,
        flags=_FLAGS[mechanism],
        put_limit=DEFAULTS.put_limit if rdma else 0,
        get_limit=DEFAULTS.get_limit if rdma else 0,
    )


@frozen(eq=False, repr=False)
class SmEndpoint(FrozenValue):
    rank: int
    pid: int


@attrs.define(eq=False, repr=False)
class _Queued(Record):
    """A send waiting for a free fragment or FIFO slot (its parts are not copied)."""

    tag: int
    head: bytes
    body: Any
    callback: Completion | None


@public
class SmModule(FaultReports, ModuleBase):
    """Shared memory to every peer on this host.

    Active messages are counted per peer in C, where the transport sends and
    takes them (lanes' too), into counters this process reads in place
    (:meth:`counter`): nothing is counted in Python on the message path.
    """

    counts_own_sends = True

    def __init__(
        self,
        limits: Limits,
        transport: Transport,
        log: FilteringBoundLogger,
        *,
        mechanism: str,
        allow_getfd: bool,
    ) -> None:
        if mechanism not in MECHANISMS:
            raise ValueError(f"btl sm: unknown single-copy mechanism {mechanism!r}")
        super().__init__("sm", _limits_for(limits, mechanism), log)
        self.transport = transport
        #: ``cma``, ``emulated`` or ``none`` (see the module docstring).
        self.mechanism = mechanism
        self._allow_getfd = allow_getfd
        self._host = host_id()
        self._namespace = pid_namespace()
        self._endpoints: dict[int, SmEndpoint] = {}
        self._lanes: dict[int, list[SmLane]] = {}
        self._lanes_blocked = False
        self._queues: dict[int, deque[_Queued]] = {}
        self._queued = 0  # sends waiting in _queues, so progress skips them cheaply
        self._closed_peers: set[int] = set()  # peers met with their segment closed
        self.init_fault_reports()
        self._armed = False
        self._registrations = Registrations("sm", NoPinBackend(), cached=False, log=log)
        self._emulation = Emulation(
            self._send_internal, self._registrations.check, limits.max_send_size
        )
        #: How each peer's segment was opened (``pidfd_getfd`` or ``/proc``).
        self.attached_via: dict[int, str] = {}
        #: Serialises every use of the transport (see the module docstring).
        self.lock: threading.RLock = threading.RLock()

    def share_lock(self, lock: threading.RLock) -> None:
        """Use ``lock`` (the bml's) as :attr:`lock`, before any traffic."""
        self.lock = lock

    # -- modex -------------------------------------------------------------

    def address(self) -> bytes:
        return pack_address(self.transport.address, self._namespace)

    def add_procs(self, procs: Sequence[Proc]) -> list[Endpoint | None]:
        me = next((proc for proc in procs if proc.local), None)
        if me is None:
            raise BtlError("btl sm: add_procs was not given this process (local=True)")
        if not self._endpoints:
            self.transport.bind(me.rank, max(proc.rank for proc in procs) + 1)
        endpoints: list[Endpoint | None] = []
        for proc in procs:
            endpoints.append(self._add(proc) if not proc.local else None)
        return endpoints

    def _add(self, proc: Proc) -> SmEndpoint | None:
        if proc.address is None or proc.host != self._host:
            return None
        address, namespace = parse_address(proc)
        if namespace != self._namespace:
            self.log.info("peer in another pid namespace; not reachable", rank=proc.rank)
            return None
        if proc.rank in self._endpoints:
            return self._endpoints[proc.rank]
        try:
            how = self.transport.attach(proc.rank, address, allow_getfd=self._allow_getfd)
        except TransportError as exc:
            if exc.errno == errno.EPROTO:
                raise ModexError(f"btl sm: rank {proc.rank}: {exc.strerror}") from exc
            # a peer that already exited (ESRCH) is the bml's to report
            self.log.warning("cannot map peer segment; not reachable", rank=proc.rank, why=str(exc))
            return None
        self.attached_via[proc.rank] = how
        if self.mechanism == "cma":
            refused = self.transport.cma_refusal(address)
            if refused:
                self._emulate(proc.rank, refused)
        endpoint = SmEndpoint(proc.rank, proc.pid)
        self._endpoints[proc.rank] = endpoint
        self._queues[proc.rank] = deque()
        return endpoint

    @property
    def single_copy(self) -> bool:
        return self.mechanism == "cma"

    def _emulate(self, rank: int, code: int) -> None:
        """CMA was refused: emulate put/get from now on (copy-in/copy-out)."""
        self.mechanism = "emulated"
        self.limits = _limits_for(self.limits, "emulated")
        if not self.transport.closed:
            self.transport.set_lane_cma(False)
        self.log.warning(
            "CMA refused; put/get emulated through the segment (copy-in/copy-out)",
            rank=rank,
            error=os.strerror(code),
        )

    def del_procs(self, endpoints: Sequence[Endpoint]) -> None:
        with self.lock:
            self._del_procs(endpoints)

    def _del_procs(self, endpoints: Sequence[Endpoint]) -> None:
        failure = BtlError("btl sm: the peer was removed (del_procs) with the send queued")
        for endpoint in endpoints:
            if self._endpoints.pop(endpoint.rank, None) is None:
                continue
            queued = self._queues.pop(endpoint.rank, deque())
            self.transport.detach(endpoint.rank)
            self.attached_via.pop(endpoint.rank, None)
            for lane in self._lanes.pop(endpoint.rank, []):
                lane.close()
            self._drop_queue(queued, failure)
            self._queue_changed()
            self._emulation.fail(endpoint.rank, failure)

    def endpoint(self, rank: int) -> SmEndpoint | None:
        """The endpoint of ``rank``, if this module reaches it."""
        return self._endpoints.get(rank)

    def _endpoint(self, endpoint: Endpoint) -> SmEndpoint:
        known = self._endpoints.get(endpoint.rank)
        if known is None:
            raise PeerFailed(f"btl sm: rank {endpoint.rank} is not reachable", rank=endpoint.rank)
        return known

    # -- active messages ----------------------------------------------------

    @staticmethod
    def _split(parts: Sequence[Buffer]) -> tuple[bytes, Any]:
        if len(parts) == 2 and type(parts[0]) is bytes:
            return parts[0], parts[1]
        if len(parts) == 1:
            only = parts[0]
            return (only, b"") if type(only) is bytes else (b"", only)
        return b"", b"".join(parts)

    def sendi(self, endpoint: Endpoint, tag: int, parts: Sequence[Buffer]) -> bool:
        with self.lock:
            return self._sendi(endpoint, tag, parts)

    def _sendi(self, endpoint: Endpoint, tag: int, parts: Sequence[Buffer]) -> bool:
        rank = endpoint.rank
        queue = self._queues.get(rank)
        if queue is None:
            self._endpoint(endpoint)  # raises: not a peer of this module
        if queue:
            return False  # keep order behind what is already queued
        head, body = self._split(parts)
        return self._send_now(rank, tag, head, body)

    def _send_now(self, rank: int, tag: int, head: bytes, body: Any) -> bool:
        try:
            return self.transport.send(rank, tag, head, body)
        except ValueError as exc:
            raise BtlError(f"btl sm: send to rank {rank}: {exc}") from exc
        except PeerClosed:
            raise self._closed_peer(rank) from None
        except PeerFault as exc:  # its segment was overwritten: it fails, with this send
            raise self.fault(exc) or PeerFailed(f"btl sm: {exc.strerror}", rank=rank) from None

    def _closed_peer(self, rank: int) -> PeerFinalized:
        """Rank ``rank`` closed its segment: what waits on it fails (once), and so does
        the send that found it closed (a send completed before is its finalize's to report)."""
        error = PeerFinalized(
            f"btl sm: rank {rank} finalized (its segment is closed): nothing sent to it "
            "is received any more",
            rank=rank,
        )
        endpoint = self._endpoints.get(rank)
        if endpoint is not None and rank not in self._closed_peers:
            self._closed_peers.add(rank)
            self.peer_lost(endpoint, error)
        return error

    def send(
        self,
        endpoint: Endpoint,
        tag: int,
        parts: Sequence[Buffer],
        callback: Completion | None = None,
    ) -> None:
        with self.lock:
            self._send(endpoint, tag, parts, callback)

    def _send(
        self,
        endpoint: Endpoint,
        tag: int,
        parts: Sequence[Buffer],
        callback: Completion | None,
    ) -> None:
        self._endpoint(endpoint)
        head, body = self._split(parts)
        queue = self._queues[endpoint.rank]
        if not queue and self._send_now(endpoint.rank, tag, head, body):
            if callback is not None:
                callback(None)
            return
        queue.append(_Queued(tag, head, body, callback))
        self._queued += 1
        self._queue_changed()

    def _send_internal(self, rank: int, tag: int, head: bytes, body: Any) -> None:
        queue = self._queues.get(rank)
        if queue is None:
            return  # the peer was removed meanwhile
        if not queue and self._send_now(rank, tag, head, body):
            return
        queue.append(_Queued(tag, head, body, None))
        self._queued += 1
        self._queue_changed()

    def _flush(self) -> int:
        done = 0
        for rank, queue in self._queues.items():
            while queue:
                item = queue[0]
                try:
                    if not self._send_now(rank, item.tag, item.head, item.body):
                        break
                except PeerFinalized as exc:  # never read: each queued send fails
                    done += self._drop_queue(queue, exc)
                    break
                queue.popleft()
                self._queued -= 1
                done += 1
                if item.callback is not None:
                    item.callback(None)
        if done:
            self._queue_changed()
        return done

    def _drop_queue(self, queue: deque[_Queued], error: BaseException) -> int:
        """Fail every send ``queue`` holds with ``error``; how many there were."""
        dropped = list(queue)
        queue.clear()
        self._queued -= len(dropped)
        for item in dropped:
            if item.callback is not None:
                item.callback(error)
        return len(dropped)

    def queued_sends(self, rank: int | None = None) -> list[QueuedSend]:
        """Active messages waiting for FIFO room (to ``rank``, or all), oldest first."""
        with self.lock:
            ranks = list(self._queues) if rank is None else [rank]
            found: list[QueuedSend] = []
            for peer in ranks:
                queue = self._queues.get(peer, deque())
                for item in queue:
                    if item.tag in INTERNAL_TAGS:
                        continue  # put/get emulation: not an active message of the caller
                    body = memoryview(item.body).cast("B")
                    head = (item.head + bytes(body[:PLACEMENT_HEAD]))[:PLACEMENT_HEAD]
                    size = len(item.head) + body.nbytes
                    found.append(QueuedSend(peer, item.tag, size, head, item.callback is None))
            return found

    def drop_queued(self, rank: int) -> list[QueuedSend]:
        """Take what waits for FIFO room to ``rank`` off for good (pending sends fail);
        the active messages dropped. What is in the FIFO already is the peer's to read."""
        with self.lock:
            found = self.queued_sends(rank)
            queue = self._queues.get(rank)
            if queue:
                self._drop_queue(queue, self.dropped(rank))
                self._queue_changed()
            return found

    # -- put / get ------------------------------------------------------------

    def register_mem(self, endpoint: Endpoint | None, base: int, size: int) -> MemoryHandle:
        if self.mechanism == "none":
            raise BtlError("btl sm: btl_sm_single_copy_mechanism=none offers no put/get")
        return self._registrations.register(base, size, pack_remote)

    def deregister_mem(self, handle: MemoryHandle) -> None:
        self._registrations.deregister(handle)

    def lane_key(self) -> int | None:
        """The key of a lane's rendezvous send (see :meth:`SmLane.reserve`)."""
        if self.mechanism == "none":
            return None
        return self._registrations.reserve()

    def lane_mark(self, key: int, base: int, size: int) -> None:
        self._registrations.mark(base, size, key)

    def lane_release(self, key: int) -> None:
        self._registrations.forget(key)

    def _rdma(
        self,
        write: bool,
        endpoint: Endpoint,
        local: memoryview,
        remote_address: int,
        remote_handle: bytes,
        callback: Completion,
    ) -> None:
        peer = self._endpoint(endpoint)
        operation = "put" if write else "get"
        if self.mechanism == "none":
            raise BtlError("btl sm: btl_sm_single_copy_mechanism=none offers no put/get")
        length = local.nbytes
        key, _ = remote_range("sm", operation, peer.rank, remote_address, length, remote_handle)
        if self.mechanism == "emulated":
            emulate = self._emulation.put if write else self._emulation.get
            emulate(peer.rank, local, key, remote_address, callback)
            return
        address, _, keep = buffer_address(local) if length else (0, 0, None)
        try:
            self.transport.cma(
                peer.pid, write=write, local=address, remote=remote_address, length=length
            )
        except TransportError as exc:
            del keep
            if exc.errno in (errno.EPERM, errno.EACCES):
                self._emulate(peer.rank, exc.errno)
                self._rdma(write, endpoint, local, remote_address, remote_handle, callback)
                return
            error: BaseException = exc
            if exc.errno == errno.ESRCH or not self.transport.alive(peer.rank):
                error = PeerFailed(
                    f"btl sm: rank {peer.rank} (pid {peer.pid}) died during {operation}: {exc}",
                    rank=peer.rank,
                )
                self.peer_lost(peer, error)
            callback(error)
            return
        del keep
        callback(None)

    def put(
        self,
        endpoint: Endpoint,
        local: memoryview,
        local_handle: MemoryHandle | None,
        remote_address: int,
        remote_handle: bytes,
        callback: Completion,
    ) -> None:
        with self.lock:
            self._rdma(True, endpoint, local, remote_address, remote_handle, callback)
            self.count_rdma(endpoint, local.nbytes)

    def get(
        self,
        endpoint: Endpoint,
        local: memoryview,
        local_handle: MemoryHandle | None,
        remote_address: int,
        remote_handle: bytes,
        callback: Completion,
    ) -> None:
        with self.lock:
            self._rdma(False, endpoint, local, remote_address, remote_handle, callback)
            self.count_rdma(endpoint, local.nbytes)

    # -- progress -------------------------------------------------------------

    def progress(self) -> int:
        with self.lock:
            return self.progress_held()

    def progress_held(self) -> int:
        """:meth:`progress` for a caller that holds :attr:`lock` already: the bml,
        whose callers hold it around every poll (re-taking it costs each poll)."""
        transport = self.transport
        if transport.closed:
            return 0
        if self._armed:
            self._armed = False
            transport.disarm()
        # Each poll hands back the fragment of the message before it, and
        # the last (empty) poll the final one: no separate release call.
        try:
            message = transport.poll()
        except TransportError as exc:
            message = self._poll_past_faults(exc)
        if message is None:
            return self._flush() if self._queued else 0
        done = 0
        handle = self.handle
        while message is not None:
            done += handle(*message)
            try:
                message = transport.poll()
            except TransportError as exc:
                message = self._poll_past_faults(exc)
        if self._queued:
            done += self._flush()
        return done

    def handle(self, source: int, tag: int, data: memoryview) -> int:
        """Act on one message taken off the FIFO; 1 if it counts as progress."""
        endpoint = self._endpoints.get(source)
        if endpoint is None:
            return 0
        if tag in INTERNAL_TAGS:
            return self._emulation.handle(source, tag, data)
        self.hand_over(endpoint, tag, data)  # counted in C as it was taken off the FIFO
        return 1

    def counter(self, name: str, rank: int) -> int:
        """Active messages (lanes' included) and lane rendezvous reads are counted in C
        (:meth:`Transport.count`); put/get issued here and failures in Python."""
        native = self.transport.count(rank, name) if name in COUNT_INDEX else 0
        return native + (super().counter(name, rank) if name in INDEX else 0)

    def _queue_changed(self) -> None:
        """Lanes stop while sends are queued (behind them, and for progress to flush them)."""
        blocked = self._queued != 0
        if blocked != self._lanes_blocked and not self.transport.closed:
            self._lanes_blocked = blocked
            self.transport.block_lanes(blocked)

    def open_lane(self, endpoint: Endpoint, am_tag: int) -> SmLane | None:
        """The message layer's fast path to ``endpoint`` for ``am_tag`` (see :class:`SmLane`)."""
        rank = endpoint.rank
        if self._endpoints.get(rank) is not endpoint or self.transport.closed:
            return None
        lane = SmLane(self, rank, am_tag)
        self.transport.set_lane_cma(self.mechanism == "cma")
        self._lanes.setdefault(rank, []).append(lane)
        return lane

    def wait_fds(self) -> list[int]:
        with self.lock:
            return self._wait_fds()

    def _wait_fds(self) -> list[int]:
        """Arms the wake pipe: call it right before each sleep (as the p2p engine does)."""
        if self.transport.closed:
            return []
        self._check_broken_peers()
        self._armed = True
        self.transport.arm()
        return [self.transport.wake_fd]

    def finalize(self) -> None:
        failure = BtlError("btl sm was finalized with the send queued")
        queues, self._queues = self._queues, {}
        for queue in queues.values():
            self._drop_queue(queue, failure)
        self._emulation.fail(None, failure)
        self._endpoints.clear()
        self.attached_via.clear()
        self._registrations.release_all()
        self.transport.close()


__all__ = ["DEFAULTS", "MECHANISMS", "SmEndpoint", "SmModule"]
