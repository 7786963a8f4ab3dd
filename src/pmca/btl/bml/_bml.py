"""Routes to every peer, built from one modex exchange.

Per peer the bml keeps the modules that reach it, best first (exclusivity
descending, then latency ascending). Eager sends use the best module of the
highest exclusivity; RDMA uses every module of that exclusivity with GET (or
PUT), and a large transfer is split across them in proportion to their
bandwidth (Open MPI's ``mca_bml_r2`` with ``btl_send``/``btl_rdma`` lists).
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

from attrs import define, evolve, field, frozen

from ..._public import public
from ..._records import FrozenValue, Record
from ...mca._events import EVENTS, Safety
from .._interface import (
    BtlModule,
    Endpoint,
    Flags,
    ModexError,
    PeerFailed,
    PeerFinalized,
    Proc,
    QueuedSend,
)
from ..base import _modex

if TYPE_CHECKING:
    from structlog.typing import FilteringBoundLogger

    from ...world import World


@public
@frozen(eq=False, repr=False)  # attrs' repr, eq and hash from FrozenValue: not compiled per class
class Route(FrozenValue):
    """One module's way to one peer."""

    module: BtlModule
    endpoint: Endpoint

    @property
    def name(self) -> str:
        return self.module.name


@public
@define(eq=False, repr=False)  # attrs' repr from Record: not compiled per class
class BmlPeer(Record):
    """Everything the message layer needs to reach one rank."""

    rank: int
    host: str
    pid: int
    #: Every module reaching the peer, best first.
    routes: list[Route]
    #: Modules for active messages: the best exclusivity only.
    send: list[Route]
    #: Modules for RDMA (GET) among ``send``'s exclusivity, with their stripe weights.
    rdma: list[tuple[Route, float]]
    failed: BaseException | None = None
    pidfd: int | None = field(default=None)

    def check(self) -> None:
        failed = self.failed
        if failed is not None:
            if isinstance(failed, PeerFinalized):  # it left: say so, not "unreachable"
                raise PeerFinalized(str(failed), rank=self.rank, after_error=failed.after_error)
            raise PeerFailed(f"rank {self.rank} is unreachable: {failed}", rank=self.rank)


def _order(route: Route) -> tuple[int, int]:
    limits = route.module.limits
    return (-limits.exclusivity, limits.latency)


def _build_peer(rank: int, entry: _modex.RankEntry, routes: list[Route]) -> BmlPeer:
    routes.sort(key=_order)
    best = routes[0].module.limits.exclusivity if routes else 0
    send = [
        r
        for r in routes
        if r.module.limits.exclusivity == best and r.module.limits.flags & Flags.SEND
    ]
    rdma_routes = [
        r for r in send if r.module.limits.flags & Flags.GET and r.module.limits.get_limit
    ]
    total = sum(max(r.module.limits.bandwidth, 1) for r in rdma_routes)
    rdma = [(r, max(r.module.limits.bandwidth, 1) / total) for r in rdma_routes]
    return BmlPeer(rank, entry.host, entry.pid, routes, send, rdma)


PEER_FAILED = EVENTS.declare(
    "btl",
    "base",
    "peer_failed",
    ("rank", "error"),
    level=2,
    description="A peer became unreachable (its process exited, or a btl lost it)",
).name


@public
class Bml:
    """Routes of one session to every rank of its world."""

    def __init__(
        self, world: World, modules: Sequence[BtlModule], log: FilteringBoundLogger
    ) -> None:
        self.world = world
        self.modules = list(modules)
        self.log = log
        self.peers: list[BmlPeer] = []
        self.lock = threading.RLock()
        shared = []
        for module in self.modules:  # one lock for the bml and the modules that take one
            share_lock = getattr(module, "share_lock", None)
            if share_lock is not None:
                share_lock(self.lock)
                shared.append(module)
        self._shared = shared
        #: The modules a wait polls: every module until :meth:`add_procs`,
        #: then only those reaching some rank (see :meth:`_poll_reaching`).
        self._polled: list[BtlModule] = list(self.modules)
        self._bind_polled()
        self._liveness_due = 0.0
        #: The pidfds of live peers on this host (kept: a spinning wait polls them).
        self._live_pidfds: list[int] = []
        self._failure_listeners: list[Any] = []
        #: Ranks that finalized and said so (the message layer's LEAVE), or that
        #: acknowledged this rank's LEAVE: their connections closing (or their
        #: processes ending) afterwards is expected, logged at debug level, not
        #: a failure to shout about.
        self.departed: set[int] = set()

    def _bind_polled(self) -> None:
        """Bind what every iteration of every wait calls on the polled modules, once.

        A module sharing the lock polls without re-taking it (its callers hold
        it); one without ``progress_ready`` reads everything after a native
        spin too, and one without ``spin_fds`` keeps waits polling from Python.
        """
        pollers: list[Callable[[], int]] = []
        readers: list[Callable[[list[int]], int]] = []
        askers: list[Callable[[], list[int] | None]] = []
        for module in self._polled:
            poll = module.progress
            if any(module is other for other in self._shared):
                poll = getattr(module, "progress_held", poll)
            pollers.append(poll)
            readers.append(getattr(module, "progress_ready", None) or _ignoring_ready(poll))
            askers.append(getattr(module, "spin_fds", None) or _no_spin_fds)
        self._pollers = tuple(pollers)
        self._readers = tuple(readers)
        self._spin_askers = tuple(askers)
        #: Whether every polled module may say which descriptors bring its input.
        self.spins = all(ask is not _no_spin_fds for ask in askers)

    def _poll_reaching(self, routes: list[list[Route]]) -> None:
        """Poll, and ask for descriptors, only the modules some rank is reached through.

        A module without a route (a tcp rail on an interface no peer pairs
        with) has no traffic to find; polled anyway it costs a call per
        module in every iteration of every wait. Routes are made only here,
        by :meth:`add_procs`, so a module gaining a peer comes back with them.
        """
        reaching = {id(route.module) for found in routes for route in found}
        self._polled = [module for module in self.modules if id(module) in reaching]
        self._bind_polled()

    # -- set-up -----------------------------------------------------------

    def exchange(self, timeout: float) -> list[_modex.RankEntry]:
        """Publish every module's address and gather everybody's: one allgather."""
        from ...world import WorldTimeout

        blob = _modex.pack({m.name: m.address() for m in self.modules})
        try:
            blobs = self.world.allgather(blob, timeout=timeout)
        except WorldTimeout as exc:
            raise ModexError(
                f"modex: rank {self.world.rank} never heard from rank(s) "
                f"{', '.join(map(str, exc.missing)) or '?'} within {timeout:g} s "
                f"(pmca_base_modex_timeout): {exc}"
            ) from exc
        if len(blobs) != self.world.size:
            raise ModexError(
                f"modex: {len(blobs)} entries gathered for a world of {self.world.size}"
            )
        return _modex.unpack_all(blobs)

    def add_procs(self, entries: Sequence[_modex.RankEntry]) -> None:
        me = self.world.rank
        entries = _launcher_placement(self.world, entries, self.log)
        routes: list[list[Route]] = [[] for _ in entries]
        for module in self.modules:
            procs = [
                Proc(e.rank, e.host, e.pid, e.addresses.get(module.name), local=e.rank == me)
                for e in entries
            ]
            endpoints = module.add_procs(procs)
            if len(endpoints) != len(procs):
                raise ModexError(
                    f"btl {module.name}: add_procs answered {len(endpoints)} endpoints "
                    f"for {len(procs)} procs"
                )
            for rank, endpoint in enumerate(endpoints):
                if endpoint is not None:
                    routes[rank].append(Route(module, endpoint))
            module.register_error(self._peer_lost)
        self.peers = [_build_peer(e.rank, e, routes[e.rank]) for e in entries]
        self._poll_reaching(routes)
        local_host = entries[me].host
        for peer in self.peers:
            if peer.rank != me and peer.host == local_host:
                peer.pidfd = _pidfd(peer.pid)
        self._keep_live_pidfds()
        self.log.debug("routes", reach={p.rank: [r.name for r in p.routes] for p in self.peers})

    # -- use --------------------------------------------------------------

    def peer(self, rank: int) -> BmlPeer:
        if not 0 <= rank < len(self.peers):
            raise ValueError(f"rank {rank} is outside the world (size {len(self.peers)})")
        return self.peers[rank]

    def reach(self, rank: int) -> list[str]:
        return [route.name for route in self.peer(rank).routes]

    def on_failure(self, listener: Any) -> None:
        self._failure_listeners.append(listener)

    def _peer_lost(self, endpoint: Endpoint, error: BaseException) -> None:
        self.fail(endpoint.rank, error)

    def fail(self, rank: int, error: BaseException) -> None:
        """Mark ``rank`` failed and tell the listeners, with :attr:`lock` held.

        Listeners change the message layer's queues, which every other
        thread reads and writes under the same lock.
        """
        with self.lock:
            peer = self.peers[rank]
            if peer.failed is not None:
                return
            peer.failed = error
            self._keep_live_pidfds()
            # The state changed above; what reacts to it below can neither undo
            # it nor stop the others (a listener that raises is reported).
            for listener in list(self._failure_listeners):
                try:
                    listener(rank, error)
                except Exception as exc:
                    self.log.error("peer failure listener raised", rank=rank, error=repr(exc))
            if rank in self.departed or isinstance(error, PeerFinalized):
                self.log.debug("connection closed after the peer finalized", rank=rank)
                return
            self.log.error("peer failed", rank=rank, error=str(error))
            if EVENTS.wanted(PEER_FAILED):
                try:
                    EVENTS.emit(PEER_FAILED, Safety.NONE, {"rank": rank, "error": str(error)})
                except Exception as exc:
                    self.log.error("peer_failed event callback raised", error=repr(exc))

    def queued_sends(self, rank: int | None = None) -> list[QueuedSend]:
        """What every module holds back to ``rank`` (or to anyone), module by module.

        Modules without the optional ``queued_sends`` operation count as
        holding nothing. Taken under :attr:`lock`.
        """
        found: list[QueuedSend] = []
        with self.lock:
            for module in self.modules:
                queued = getattr(module, "queued_sends", None)
                if queued is not None:
                    found.extend(queued(rank))
        return found

    def progress(self) -> int:
        """Poll every module once; messages and completions handled.

        Call it with :attr:`lock` held (every caller in p2p does).
        """
        done = 0
        for poll in self._pollers:
            done += poll()
        return done

    def progress_ready(self, ready: list[int]) -> int:
        """:meth:`progress` right after the descriptors of :meth:`spin_fds` were polled
        and ``ready`` found readable: modules that can (tcp's ``progress_ready``)
        read only those instead of polling their descriptors again.

        Call it with :attr:`lock` held.
        """
        done = 0
        for read in self._readers:
            done += read(ready)
        return done

    def check_liveness(self, interval: float) -> None:
        """Notice peers the launcher reports failed (at once), and local peers that
        exited (pidfd readable, at most every ``interval`` s).

        Failures are marked under :attr:`lock` (:meth:`fail` takes it): they
        change what other threads use.
        """
        notices = getattr(self.world, "peer_notices", None)
        if notices is not None:
            for notice in notices():
                host = _modex.host_name(self.peers[notice.rank].host)
                self.fail(
                    notice.rank,
                    PeerFailed(
                        f"the launcher reports rank {notice.rank} on host {host} failed "
                        f"({notice.reason}, "
                        f"through {self.world.description})",
                        rank=notice.rank,
                    ),
                )
        now = time.monotonic()
        if now < self._liveness_due:
            return
        import select

        with self.lock:
            self._liveness_due = now + interval
            fds = {p.pidfd: p for p in self.peers if p.pidfd is not None and p.failed is None}
            if not fds:
                return
            readable, _, _ = select.select(list(fds), [], [], 0)
            for fd in readable:
                peer = fds[fd]
                self.fail(
                    peer.rank,
                    PeerFailed(
                        f"process {peer.pid} (rank {peer.rank} on host "
                        f"{_modex.host_name(peer.host)}) exited",
                        rank=peer.rank,
                    ),
                )

    def wait_fds(self) -> list[int] | None:
        """What to sleep on while waiting, or ``None`` if some module must be polled.

        Call it with :attr:`lock` held: modules arm their wake-ups here.
        """
        fds: list[int] = []
        for module in self._polled:
            module_fds = module.wait_fds()
            if module_fds is None:
                return None
            fds.extend(module_fds)
        return self._with_liveness(fds)

    def spin_fds(self) -> list[int] | None:
        """What a spinning wait polls in C, the GIL released (``libpmca_bml_spin.so``),
        or ``None`` if some module's input comes without a descriptor. Arms nothing.

        A module answers through its optional ``spin_fds()``: descriptors
        readable whenever :meth:`progress` would find work (``[]``: none
        comes from outside), or ``None``. After the poll, :meth:`progress_ready`
        reads what it found. Call it with :attr:`lock` held.
        """
        fds: list[int] = []
        for ask in self._spin_askers:
            module_fds = ask()
            if module_fds is None:
                return None
            fds += module_fds
        return self._with_liveness(fds)

    def _with_liveness(self, fds: list[int]) -> list[int]:
        """``fds`` and what says a peer is gone: live peers' pidfds, the launcher's."""
        fds += self._live_pidfds
        notice_fd = getattr(self.world, "notice_fd", None)
        launcher_fd = notice_fd() if notice_fd is not None else None
        if launcher_fd is not None:
            fds.append(launcher_fd)
        return fds

    def _keep_live_pidfds(self) -> None:
        """Note the pidfds of live peers again (a peer gained one, failed, or closed)."""
        self._live_pidfds = [
            p.pidfd for p in self.peers if p.pidfd is not None and p.failed is None
        ]

    def close(self) -> None:
        for module in self.modules:
            endpoints = [r.endpoint for p in self.peers for r in p.routes if r.module is module]
            try:
                module.del_procs(endpoints)
            except Exception as exc:
                self.log.error("del_procs failed", btl=module.name, error=repr(exc))
        for peer in self.peers:
            if peer.pidfd is not None:
                os.close(peer.pidfd)
                peer.pidfd = None
        self.peers = []
        self._keep_live_pidfds()


def _ignoring_ready(poll: Callable[[], int]) -> Callable[[list[int]], int]:
    """``poll`` as a module's ``progress_ready``: it looks for itself."""

    def read(_ready: list[int]) -> int:
        return poll()

    return read


def _no_spin_fds() -> None:
    """``spin_fds`` of a module without one: its input comes without a descriptor."""
    return None


def _launcher_placement(
    world: World, entries: Sequence[_modex.RankEntry], log: FilteringBoundLogger
) -> Sequence[_modex.RankEntry]:
    """The entries with each rank's host as the launcher places it, if it says.

    A peer the launcher puts on this host gets this process's host id (so
    shared memory is tried; its pid namespace is still checked), any other
    its own host name followed by the launcher's name for its host, which no
    host id equals: the modex's own host ids are a guess (a host name and
    boot id), the launcher knows. Messages name a host by the part before
    the first ``/`` (:func:`~pmca.btl.base.host_name`): the name the rank
    gave itself, whichever rank reports it.
    """
    locality_of = getattr(world, "locality", None)
    locality = locality_of() if locality_of is not None else None
    if locality is None or len(locality.hosts) != len(entries):
        return entries
    mine = entries[world.rank].host
    placed = [
        evolve(
            entry,
            host=mine
            if entry.rank in locality.local
            else f"{_modex.host_name(entry.host)}/launcher:{locality.hosts[entry.rank]}",
        )
        for entry in entries
    ]
    log.debug(
        "placement from the launcher",
        local=sorted(locality.local),
        hosts=dict(enumerate(locality.hosts)),
    )
    return placed


def _pidfd(pid: int) -> int | None:
    try:
        return os.pidfd_open(pid)
    except (AttributeError, OSError):
        return None


@public
def connect(
    world: World, modules: Sequence[BtlModule], log: FilteringBoundLogger, timeout: float
) -> Bml:
    """Exchange addresses over ``world`` and build the routes to every rank."""
    bml = Bml(world, modules, log)
    bml.add_procs(bml.exchange(timeout))
    return bml
