"""Point-to-point messages over the bml (a thin ob1).

Eager: a message whose header and payload fit the route's eager limit goes
in one active message; a btl that receives large ones in pieces (tcp) asks
where it goes, and one that matches a posted receive lands straight in that
receive's buffer. Larger ones use a rendezvous: with RDMA-capable
routes the sender registers its buffer and the receiver, once matched,
reads it with btl ``get`` (striped across the routes by bandwidth) and sends
FIN; without RDMA the receiver answers a clear-to-send and the sender
pushes fragments. Matching follows MPI's rules, wildcards included
(:mod:`._matching`).
"""

from __future__ import annotations

import functools
import itertools
import os
import select
import time
from collections.abc import Callable
from time import perf_counter_ns
from typing import TYPE_CHECKING, Any

from .._public import public
from ..btl import BtlError, Completion, Endpoint, PeerFailed, PeerFinalized
from ..btl.bml import Bml, BmlPeer, Route
from ..btl.bml._spin import SLICE as SPIN_SLICE
from ..btl.bml._spin import spinner
from . import _protocol as proto
from ._blocking import LANE_SPIN, Blocking
from ._buffers import address_of, as_bytes
from ._checks import check_rank, check_tag
from ._holding import HeldMessages
from ._leaving import Leaving
from ._matching import ANY_SOURCE, TAG_UB, Posted, Unexpected
from ._placing import Placing
from ._probing import Probing
from ._pvars import MATCHING_TIMER, queued, register_engine, retire_engine
from ._rendezvous import Fragments, Incoming, Rendezvous
from ._requests import Request, TruncationError, truncation
from ._routes import open_lanes, rendezvous_lanes

if TYPE_CHECKING:
    from structlog.typing import FilteringBoundLogger

_SPINS = 64
_MATCH_SIZE = proto.MATCH.size
# bound once: every eager message packs and unpacks one match header
_pack_match = proto.MATCH.pack
_unpack_match = proto.MATCH.unpack_from
_MATCHING = frozenset((proto.EAGER, proto.RGET, proto.RNDV))


@public
class P2p(Placing, Blocking, Probing, Rendezvous, Leaving, HeldMessages):
    """``send``/``recv``/``isend``/``irecv``, probes and cancels of one session (``s.p2p``).

    Every operation on the queues holds the bml's lock, so any thread may
    call any of them.
    """

    def __init__(self, bml: Bml, am_tag: int, log: FilteringBoundLogger) -> None:
        self._bml = bml
        self._peers = bml.peers
        self._tag = am_tag
        self._log = log
        size = len(bml.peers)
        self._seq_out = [0] * size
        self._seq_in = [0] * size
        self._stash: list[dict[int, tuple[int, bytes]]] = [{} for _ in range(size)]
        self._posted: Posted[Request] = Posted()
        self._unexpected: Unexpected[Incoming] = Unexpected()
        #: Messages ever queued as unexpected, and the most waiting at once (pvars).
        self.unexpected_total = 0
        self.unexpected_peak = 0
        #: Nanoseconds spent searching the queues while the timer pvar is started.
        self.matching_ns = 0
        self._sends: dict[int, Request] = {}
        self._fragments: dict[int, Fragments] = {}
        self._pending: dict[int, Request] = {}
        self._ids = itertools.count(1)
        #: No new operations (finalize began), and finalize done.
        self._closed = False
        self._finalized = False
        self._init_leaving()
        register_engine(self)
        self._spin = 0.05
        self._yield_when_idle = False
        self._registered: list[Any] = []
        try:
            for module in bml.modules:
                module.register_recv(am_tag, self._arrived)
                self._registered.append(module)
                register_placer = getattr(module, "register_placer", None)
                if register_placer is not None:
                    register_placer(am_tag, self._place)
        except BaseException:
            for module in self._registered:
                module.unregister_recv(am_tag)
            raise
        bml.on_failure(self._peer_failed)
        self._init_holding(size, self._registered)
        self._lanes = open_lanes(bml, am_tag)
        self._rget_lanes = rendezvous_lanes(bml, self._lanes)
        self._set_lane_spin(LANE_SPIN)

    # -- public API ---------------------------------------------------------

    @property
    def rank(self) -> int:
        return self._bml.world.rank

    @property
    def size(self) -> int:
        return self._bml.world.size

    @property
    def spin(self) -> float:
        """Seconds a wait keeps polling before it sleeps (``btl_base_wait_spin``)."""
        return self._spin

    @spin.setter
    def spin(self, seconds: float) -> None:
        self._spin = seconds
        self._set_lane_spin(min(seconds, LANE_SPIN), self._yield_when_idle)

    @property
    def yield_when_idle(self) -> bool:
        """Yield the processor between polls (``mpi_yield_when_idle``; oversubscribed hosts)."""
        return self._yield_when_idle

    @yield_when_idle.setter
    def yield_when_idle(self, value: bool) -> None:
        self._yield_when_idle = value
        self.spin = self._spin

    def isend(self, dest: int, tag: int, buf: Any) -> Request:
        dest, tag = self._checked(dest, tag, "p2p send", wildcard=False)
        view = as_bytes(buf, writable=False, rank=dest, tag=tag)
        request = self._start_send(dest, tag, view)
        if request is None:  # the btl took it at once: done
            request = Request(self, "send", dest, tag, view)
            request.complete(view.nbytes)
        return request

    def _start_send(self, dest: int, tag: int, view: memoryview) -> Request | None:
        """Send ``view`` (``dest`` and ``tag`` checked): ``None`` when the btl took it
        at once (an eager message), else its request, pending or done.

        A blocking ``send`` over a btl without lanes (tcp) so builds no request
        for the message the socket takes at once.
        """
        peer = self._peer(dest)
        with self._bml.lock:
            # Again under the lock: finalize says its LEAVEs under it, and progress
            # on another thread records a peer's LEAVE in it.
            self._ensure_open()
            if self.gone and dest in self.gone:
                raise self._gone_error(dest)
            route = self._route(peer)
            seq = self._seq_out[dest]
            self._seq_out[dest] = (seq + 1) & 0xFFFFFFFF
            size = view.nbytes
            if _MATCH_SIZE + size <= route.module.limits.eager_limit:
                header = _pack_match(proto.EAGER, 0, seq, tag, size)
                if route.module.sendi(route.endpoint, self._tag, [header, view]):
                    return None  # never tracked
                request = Request(self, "send", dest, tag, view)
                self._send_eager(request, route, header, size)
                return request
            request = Request(self, "send", dest, tag, view)
            self._track(request)
            if peer.rdma:
                self._send_rget(request, peer, route, seq, size)
            else:
                send_id = self._awaiting_answer(request)
                header = proto.MATCH.pack(proto.RNDV, 0, seq, tag, size)
                self._control(route, header + proto.RNDV_BODY.pack(send_id))
        return request

    def irecv(self, source: int, tag: int, buf: Any) -> Request:
        """Post a receive; ``source`` may be :data:`ANY_SOURCE`, ``tag`` :data:`ANY_TAG`."""
        source, tag = self._checked(source, tag, "p2p recv", wildcard=True)
        view = as_bytes(buf, writable=True, rank=source, tag=tag)
        peer = self._peers[source] if source != ANY_SOURCE else None
        request = Request(self, "recv", source, tag, view)
        with self._bml.lock:
            self._ensure_open()  # under the lock finalize says its LEAVEs under
            self._track(request)
            unexpected = self._unexpected
            if MATCHING_TIMER.on:
                began = perf_counter_ns()
                incoming = unexpected.take(source, tag) if unexpected.streams else None
                self.matching_ns += perf_counter_ns() - began
            else:
                incoming = unexpected.take(source, tag) if unexpected.streams else None
            if incoming is not None:
                self._match(request, incoming)
                self._taken(incoming.source, incoming.payload)  # this receive done: no wait
            elif peer is not None and peer.failed is not None:
                self._finish(request, 0, self._failure(peer))
            elif source in self.gone:
                self._finish(request, 0, self._gone_error(source))
            else:
                self._posted.add(request)
                self.eased(source)  # what it waits for may be behind input a btl stopped
        return request

    def cancel_receive(self, request: Request) -> bool:
        """:meth:`Request.cancel` of a receive: withdrawn while no message matched it."""
        with self._bml.lock:
            if request.done or not self._posted.remove(request):
                return False
            request.cancelled = True
            self._finish(request, 0)
            return True

    def _checked(self, rank: object, tag: object, where: str, *, wildcard: bool) -> tuple[int, int]:
        peers = len(self._peers)
        if type(rank) is int and type(tag) is int and 0 <= tag <= TAG_UB and 0 <= rank < peers:
            return rank, tag  # the common case: nothing to convert or name
        return (
            check_rank(rank, peers, where, wildcard=wildcard),
            check_tag(tag, where, wildcard=wildcard),
        )

    def progress(self) -> int:
        with self._bml.lock:
            done = self._bml.progress()
            if self._early:
                # A LEAVE that came ahead of earlier data takes effect (and is
                # acknowledged) as soon as that data is in, also for callers
                # that only poll with test().
                self._check_early()
            return done

    def wait_for(
        self,
        condition: Callable[[], bool] | None,
        timeout: float | None,
        request: Request | None = None,
    ) -> None:
        """Progress until ``condition()`` (``request.done`` when it is ``None``).

        :class:`TimeoutError` after ``timeout`` seconds.
        """
        if condition is None:
            if request is None:
                raise ValueError("wait_for needs a condition or a request")
            condition = request.finished
        bml = self._bml
        lock, progress, progress_ready = bml.lock, bml.progress, bml.progress_ready
        yielding = self.yield_when_idle
        give_way = os.sched_yield if yielding else None
        # While spinning, the btls' descriptors are polled in C between two
        # progress calls, the GIL released for a slice (see pmca.btl.bml._spin);
        # the _SPINS counted slices together last no longer than ``spin``.
        # The poll says which descriptors had input: the progress call after it
        # reads those without asking the kernel again, and the first one of a
        # wait polls nothing when a native poll follows at once (it finds
        # whatever is there already).
        native = spinner()
        spin_fds = bml.spin_fds
        slice_ = min(SPIN_SLICE, self.spin / _SPINS)
        deadline = None if timeout is None else time.monotonic() + timeout
        idle = 0
        spin_until = 0.0
        spinning = True
        #: What the last native poll found readable (None: each module looks itself).
        ready: list[int] | None = [] if native is not None and bml.spins else None
        while not condition():
            with lock:
                progressed = progress() if ready is None else progress_ready(ready)
                polled = spin_fds() if native is not None and spinning and not progressed else None
            if progressed:
                idle = 0
                spinning = True
                ready = None
                continue
            if polled is not None and native is not None:
                ready = native.ready(polled, slice_, yielding)
            elif ready is not None:
                # No native poll this turn after one that read only what a poll
                # found (or nothing, first): the next progress looks for itself.
                ready = None
                continue
            elif give_way is not None:
                give_way()  # the rank that would answer may be waiting for this core
            idle += 1
            if idle < _SPINS:
                continue
            now = time.monotonic()
            if idle == _SPINS:
                spin_until = now + self.spin
            if now < spin_until:
                continue
            spinning = False
            ready = None  # what the last poll found is stale once this wait sleeps
            bml.check_liveness(0.05)  # takes the lock: failures change the queues
            if self._early:
                with lock:
                    self._check_early()
            if condition():
                return
            if deadline is not None and time.monotonic() > deadline:
                what = request.describe() if request is not None else "p2p wait"
                raise TimeoutError(f"{what} did not finish within {timeout:g} s")
            with lock:  # arming a btl's wake-up changes its state too
                fds = bml.wait_fds()
            if fds is None:
                os.sched_yield()
            elif fds:
                select.select(fds, [], [], 0.05)
            else:
                time.sleep(0.0001)

    def close(
        self, timeout: float, *, after_error: bool = False, finalize_timeout: float | None = None
    ) -> None:
        """Leave (see :mod:`._leaving`), then fail what is left and stop receiving.

        ``finalize_timeout`` bounds the wait for this rank's own sends
        (default: ``timeout``); ``timeout`` the wait for the peers'
        acknowledgements (``finalize_timeout`` after an error).
        """
        with self._bml.lock:
            if self._closed:
                return
            self._closed = True  # no new operations: the LEAVEs follow under this lock
            self.eased(ANY_SOURCE)  # finalize reads every peer
        try:
            drain = timeout if finalize_timeout is None else finalize_timeout
            self.leave(after_error=after_error, drain=drain, barrier=timeout)
        finally:
            self._finalized = True
            failure = BtlError("the pmca session was finalized before this operation finished")
            with self._bml.lock:
                for request in list(self._pending.values()):
                    self._finish(request, 0, failure)
                for module in self._registered:
                    module.unregister_recv(self._tag)
            self._registered = []
            retire_engine(self)  # nothing arrives for it now: its counts are final
            self._say_reports()

    # -- sending ------------------------------------------------------------

    def _ensure_open(self) -> None:
        if self._closed:
            if self._finalized:
                raise BtlError("p2p is closed (its session was finalized)")
            raise BtlError(
                f"p2p: rank {self.rank}'s session is finalizing: it accepts no new send or receive"
            )

    def _peer(self, rank: int) -> BmlPeer:
        self._ensure_open()
        return self._peers[rank]

    def _route(self, peer: BmlPeer) -> Route:
        peer.check()
        if not peer.send:
            raise BtlError(
                f"no btl reaches rank {peer.rank} (open btls: "
                f"{', '.join(m.name for m in self._bml.modules) or 'none'})"
            )
        return peer.send[0]

    def _track(self, request: Request) -> None:
        key = id(request)
        self._pending[key] = request
        request.cleanup.append(functools.partial(self._pending.pop, key, None))

    def _finish(self, request: Request, nbytes: int, error: BaseException | None = None) -> None:
        request.complete(nbytes, error)

    def _send_eager(self, request: Request, route: Route, header: bytes, size: int) -> None:
        """Send an eager message the btl did not take at once (``sendi``): tracked
        until the btl says it is gone."""
        self._track(request)

        def sent(error: BaseException | None) -> None:
            self._finish(request, size, error)

        route.module.send(route.endpoint, self._tag, [header, request.view], sent)

    def _send_rget(
        self, request: Request, peer: BmlPeer, route: Route, seq: int, size: int
    ) -> None:
        address = address_of(request.view)
        handles: list[tuple[str, bytes]] = []
        for rdma, _weight in peer.rdma:
            handle = rdma.module.register_mem(rdma.endpoint, address, size)
            request.cleanup.append(functools.partial(rdma.module.deregister_mem, handle))
            handles.append((rdma.name, handle.packed))
        send_id = self._awaiting_answer(request)
        lane = self._lanes.get(request.peer)
        if lane is not None and len(handles) == 1 and peer.rdma[0][0].module is route.module:
            # the lane packs the same header in one native call
            packed = handles[0][1]
            if lane.send_rget(seq, request.tag, send_id, address, size, packed, len(packed)) == 0:
                return
        message = b"".join(
            (
                proto.MATCH.pack(proto.RGET, 0, seq, request.tag, size),
                proto.RGET_BODY.pack(send_id, address, len(handles)),
                proto.pack_handles(handles),
            )
        )
        self._control(route, message)

    def _control(self, route: Route, message: bytes, handed: Completion | None = None) -> None:
        """Send a control message on ``route``; ``handed`` once the btl took it."""
        module = route.module
        if module.sendi(route.endpoint, self._tag, [message]):
            if handed is not None:
                handed(None)
        else:
            module.send(route.endpoint, self._tag, [message], handed)

    def _control_to(self, rank: int, message: bytes, handed: Completion | None = None) -> None:
        """Send a control message to ``rank`` on its first route, behind its data.

        ``handed`` is called once: when a btl took the message, or with the
        error when none could (a failed peer's requests learn it separately).
        """
        peer = self._bml.peer(rank)
        try:
            self._control(self._route(peer), message, handed)
        except BtlError as exc:
            if handed is not None:
                handed(exc)
            if peer.failed is None:
                self._log.info("control message not sent", rank=rank, why=str(exc))

    # -- receiving ----------------------------------------------------------

    def _arrived(self, endpoint: Endpoint, _tag: int, data: memoryview) -> None:
        kind = data[0]
        source = endpoint.rank
        if kind in _MATCHING:
            header = _unpack_match(data)
            if header[2] != self._seq_in[source]:
                self._stash[source][header[2]] = (kind, bytes(data))
                return
            self._in_order(source, header, data[_MATCH_SIZE:])
            if self._stash[source]:  # messages that came early (another route)
                self._drain_stash(source)
        elif kind == proto.FIN:
            _, status, send_id = proto.FIN_MSG.unpack(data)
            self._fin(source, status, send_id)
        elif kind == proto.CTS:
            _, send_id, recv_id = proto.CTS_MSG.unpack(data)
            self._push_fragments(source, send_id, recv_id)
        elif kind == proto.FRAG:
            self._fragment(data)
        elif kind == proto.LEAVE or kind == proto.LEAVE_ACK:
            self._leave_message(source, data)
        else:
            self._log.error("unknown p2p message kind; dropped", kind=kind, source=source)

    def queue_lengths(self) -> tuple[int, int]:
        """Receives posted and unmatched, and unexpected messages waiting (pvars)."""
        posted = queued(self._posted.streams.values()) + len(self._posted.wild)
        return posted, len(self._unexpected)

    def _drain_stash(self, source: int) -> None:
        """Match the messages from ``source`` that arrived early and are now next."""
        stash = self._stash[source]
        while stash:
            entry = stash.pop(self._seq_in[source], None)
            if entry is None:
                break
            early = memoryview(entry[1])
            self._in_order(source, _unpack_match(early), early[_MATCH_SIZE:])

    def _in_order(
        self,
        source: int,
        header: tuple[int, int, int, int, int],
        body: memoryview,
        owned: bytearray | None = None,
    ) -> None:
        """Match one message; ``owned`` holds an eager payload that may be kept as it is."""
        kind, _flags, seq, tag, size = header
        self._seq_in[source] = (seq + 1) & 0xFFFFFFFF
        if kind != proto.EAGER and self._said and source in self._said:
            # This rank told the sender it left: it reads nothing more from it,
            # and the sender fails the send at that LEAVE. Reported unreceived.
            request = None
        elif MATCHING_TIMER.on:
            began = perf_counter_ns()
            request = self._posted.take(source, tag)
            self.matching_ns += perf_counter_ns() - began
        else:
            request = self._posted.take(source, tag)
        if kind == proto.EAGER:
            if request is not None:  # the common case: the receive is waiting
                request.peer, request.tag = source, tag
                self._deliver_eager(request, body, size)
                return
            incoming = Incoming(kind, source, tag, size, bytes(body) if owned is None else owned)
        elif kind == proto.RGET:
            send_id, address, count = proto.RGET_BODY.unpack_from(body)
            handles = proto.unpack_handles(body[proto.RGET_BODY.size :], count)
            incoming = Incoming(kind, source, tag, size, b"", send_id, address, handles)
        else:
            (send_id,) = proto.RNDV_BODY.unpack_from(body)
            incoming = Incoming(kind, source, tag, size, b"", send_id)
        if request is not None:
            self._match(request, incoming)
            return
        self._unexpected.add(incoming)
        self._kept(source, incoming.payload)
        self.unexpected_total += 1
        waiting = len(self._unexpected)
        if waiting > self.unexpected_peak:
            self.unexpected_peak = waiting

    def _deliver_eager(
        self, request: Request, payload: memoryview | bytes | bytearray, size: int
    ) -> None:
        if size > request.view.nbytes:
            self._finish(request, 0, self._truncated(request, size))
            return
        request.view[:size] = payload
        self._finish(request, size)

    def _truncated(self, request: Request, size: int) -> TruncationError:
        return truncation(size, request.peer, request.tag, request.view.nbytes)

    def _match(self, request: Request, incoming: Incoming) -> None:
        request.peer, request.tag = incoming.source, incoming.tag
        if incoming.kind == proto.EAGER:
            self._deliver_eager(request, incoming.payload, incoming.size)
            return
        if incoming.size > request.view.nbytes:
            self._finish(request, 0, self._truncated(request, incoming.size))
            self._control_to(
                incoming.source,
                proto.FIN_MSG.pack(proto.FIN, proto.STATUS_TRUNCATED, incoming.send_id),
            )
            return
        if incoming.kind == proto.RNDV:
            self._clear_to_send(request, incoming)
            return
        self._get(request, incoming)

    # -- failures -----------------------------------------------------------

    def _failure(self, peer: BmlPeer) -> PeerFailed:
        return self._lost(peer.rank, peer.failed)

    def _lost(self, rank: int, error: BaseException | None) -> PeerFailed:
        """The error of an operation on ``rank``, which failed with ``error`` or finalized."""
        if rank in self.gone:
            return self._gone_error(rank)
        if isinstance(error, PeerFinalized):  # a btl saw it leave before its LEAVE came
            return PeerFinalized(str(error), rank=rank, after_error=error.after_error)
        return PeerFailed(f"rank {rank} failed: {error}", rank=rank)

    def _gone_error(self, rank: int) -> PeerFinalized:
        """A fresh error for an operation naming ``rank``, which finalized."""
        gone = self.gone[rank]
        return PeerFinalized(str(gone), rank=rank, after_error=gone.after_error)

    def _peer_failed(self, rank: int, error: BaseException) -> None:
        """Fail what waits on ``rank`` (the bml calls it with its lock held).

        Receives from :data:`ANY_SOURCE` stay posted: another rank may still
        send what they wait for.
        """
        failure = self._lost(rank, error)
        with self._bml.lock:
            for request in list(self._pending.values()):
                if request.peer == rank:
                    self._finish(request, 0, failure)
            self._posted.drop_source(rank)
