"""The self module: sends are queued and delivered by progress; put/get are memmoves."""

from __future__ import annotations

from collections import deque
from collections.abc import Sequence
from typing import TYPE_CHECKING

from attrs import frozen

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
    Proc,
    QueuedSend,
)
from ..base import ModuleBase, NoPinBackend, Registrations
from ..base._pvars import BYTES_RECEIVED, BYTES_SENT, MESSAGES_RECEIVED, MESSAGES_SENT
from ..base._remote import memory_at, pack_remote, remote_range

if TYPE_CHECKING:
    from structlog.typing import FilteringBoundLogger

_ADDRESS = b"self/1"
#: Fragments come in powers of two from this size on, and this many free ones of
#: each size up to the largest kept are kept for the next sends (what a burst
#: leaves behind stays bounded: at most 8 MiB).
_SMALLEST_FRAGMENT = 256
_KEPT_FRAGMENTS = 64
_LARGEST_KEPT = 64 * 1024


class _Fragments:
    """Buffers a queued message is copied into and handed over from: a steady
    stream of sends takes the same ones again and allocates nothing per message
    (a receiver copies what it keeps: the data is valid only during its call)."""

    __slots__ = ("_free",)

    def __init__(self) -> None:
        self._free: dict[int, list[memoryview]] = {}

    def copy(self, parts: Sequence[Buffer]) -> tuple[memoryview, int]:
        """A fragment holding ``parts`` one after another, and their size."""
        views = [_flat(part) for part in parts]
        size = 0
        for view in views:
            size += len(view)
        capacity = max(_SMALLEST_FRAGMENT, 1 << (size - 1).bit_length())
        free = self._free.get(capacity)
        fragment = free.pop() if free else memoryview(bytearray(capacity))
        at = 0
        for view in views:
            end = at + len(view)
            fragment[at:end] = view
            at = end
        return fragment, size

    def give_back(self, fragment: memoryview) -> None:
        if len(fragment) > _LARGEST_KEPT:
            return
        free = self._free.get(len(fragment))
        if free is None:
            free = self._free[len(fragment)] = []
        if len(free) < _KEPT_FRAGMENTS:
            free.append(fragment)


def _flat(part: Buffer) -> bytes | bytearray | memoryview:
    """``part`` as bytes of format ``B`` (what a slice of a fragment takes)."""
    if isinstance(part, (bytes, bytearray)):
        return part
    view = part if isinstance(part, memoryview) else memoryview(part)
    return view if view.format == "B" and view.ndim == 1 else view.cast("B")


@frozen(eq=False, repr=False)
class SelfEndpoint(FrozenValue):
    rank: int


@public
class SelfModule(ModuleBase):
    """Loopback: only ever reaches this process.

    Its one peer's counters are counted on a list held here (``_counts``):
    the bytes when a message is queued, the receipt when it is delivered.
    """

    counts_own_sends = True

    def __init__(self, limits: Limits, log: FilteringBoundLogger) -> None:
        super().__init__("self", limits, log)
        self._queue: deque[tuple[SelfEndpoint, int, memoryview, int, Completion | None]] = deque()
        self._fragments = _Fragments()
        self._completions: deque[Completion] = deque()
        self._registrations = Registrations("self", NoPinBackend(), cached=False, log=log)
        self._endpoint: SelfEndpoint | None = None
        self._counts: list[int] = []

    def address(self) -> bytes:
        return _ADDRESS

    def add_procs(self, procs: Sequence[Proc]) -> list[Endpoint | None]:
        endpoints: list[Endpoint | None] = []
        for proc in procs:
            if proc.local and proc.address is not None and proc.address != _ADDRESS:
                raise ModexError(f"btl self: rank {proc.rank} published {proc.address!r}")
            if proc.local:
                self._endpoint = SelfEndpoint(proc.rank)
                self._counts = self.peer_traffic(proc.rank)
            endpoints.append(self._endpoint if proc.local else None)
        return endpoints

    def _check(self, endpoint: Endpoint) -> SelfEndpoint:
        if self._endpoint is None or endpoint is not self._endpoint:
            raise BtlError(f"btl self: {endpoint!r} is not this process")
        return self._endpoint

    def sendi(self, endpoint: Endpoint, tag: int, parts: Sequence[Buffer]) -> bool:
        fragment, size = self._fragments.copy(parts)
        self._queue.append((self._check(endpoint), tag, fragment, size, None))
        counts = self._counts  # size: not counted inside the addition (btl.base._pvars)
        counts[MESSAGES_SENT] += 1
        counts[BYTES_SENT] += size
        return True

    def send(
        self,
        endpoint: Endpoint,
        tag: int,
        parts: Sequence[Buffer],
        callback: Completion | None = None,
    ) -> None:
        target = self._check(endpoint)
        fragment, size = self._fragments.copy(parts)
        self._queue.append((target, tag, fragment, size, callback))
        counts = self._counts  # size: not counted inside the addition (btl.base._pvars)
        counts[MESSAGES_SENT] += 1
        counts[BYTES_SENT] += size

    def register_mem(self, endpoint: Endpoint | None, base: int, size: int) -> MemoryHandle:
        return self._registrations.register(base, size, pack_remote)

    def deregister_mem(self, handle: MemoryHandle) -> None:
        self._registrations.deregister(handle)

    def _remote(
        self, operation: str, rank: int, remote_address: int, remote_handle: bytes, size: int
    ) -> memoryview:
        key, _ = remote_range("self", operation, rank, remote_address, size, remote_handle)
        self._registrations.check(key, remote_address, size)
        return memory_at(remote_address, size)

    def put(
        self,
        endpoint: Endpoint,
        local: memoryview,
        local_handle: MemoryHandle | None,
        remote_address: int,
        remote_handle: bytes,
        callback: Completion,
    ) -> None:
        self._check(endpoint)
        remote = self._remote("put", endpoint.rank, remote_address, remote_handle, local.nbytes)
        remote[:] = local.cast("B")
        self.count_rdma(endpoint, local.nbytes)
        self._completions.append(callback)

    def get(
        self,
        endpoint: Endpoint,
        local: memoryview,
        local_handle: MemoryHandle | None,
        remote_address: int,
        remote_handle: bytes,
        callback: Completion,
    ) -> None:
        self._check(endpoint)
        remote = self._remote("get", endpoint.rank, remote_address, remote_handle, local.nbytes)
        local.cast("B")[:] = remote
        self.count_rdma(endpoint, local.nbytes)
        self._completions.append(callback)

    def queued_sends(self, rank: int | None = None) -> list[QueuedSend]:
        """Messages to this process not yet delivered (the next progress delivers them)."""
        return [
            QueuedSend(
                endpoint.rank,
                tag,
                size,
                bytes(fragment[: min(size, PLACEMENT_HEAD)]),
                callback is None,
            )
            for endpoint, tag, fragment, size, callback in self._queue
            if rank is None or rank == endpoint.rank
        ]

    def drop_queued(self, rank: int) -> list[QueuedSend]:
        """Take the messages to this process not yet delivered off for good (pending
        sends fail); those dropped."""
        found = self.queued_sends(rank)
        kept = [entry for entry in self._queue if entry[0].rank != rank]
        dropped = [entry for entry in self._queue if entry[0].rank == rank]
        self._queue.clear()
        self._queue.extend(kept)
        for endpoint, _tag, fragment, _size, callback in dropped:
            self._fragments.give_back(fragment)
            if callback is not None:
                callback(self.dropped(endpoint.rank))
        return found

    def spin_fds(self) -> list[int] | None:
        """Nothing comes from outside: a spinning wait polls only the other btls
        (while something is queued here, progress has work: ``None``)."""
        return None if self._queue or self._completions else []

    def progress(self) -> int:
        done = 0
        while self._completions:
            self._completions.popleft()(None)
            done += 1
        while self._queue:
            endpoint, tag, fragment, size, callback = self._queue.popleft()
            counts = self._counts
            counts[MESSAGES_RECEIVED] += 1
            counts[BYTES_RECEIVED] += size
            try:
                self.hand_over(endpoint, tag, fragment[:size])
            finally:
                self._fragments.give_back(fragment)
            if callback is not None:
                callback(None)
            done += 1
        return done

    def finalize(self) -> None:
        dropped = len(self._queue)
        self._queue.clear()
        self._completions.clear()
        self._registrations.release_all()
        if dropped:
            self.log.info("finalize dropped undelivered self messages", count=dropped)
