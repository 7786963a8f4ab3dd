"""Bookkeeping every btl module shares: active-message table, error callbacks."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from ..._public import public
from .._interface import (
    TAG_MAX,
    BtlError,
    Completion,
    Endpoint,
    ErrorCallback,
    Limits,
    MemoryHandle,
    Placement,
    Placer,
    RecvCallback,
)
from ._pvars import (
    count_received,
    counting_send,
    counting_sendi,
    noting_peers,
    register_module,
)

if TYPE_CHECKING:
    from structlog.typing import FilteringBoundLogger


def _check_tag(tag: int) -> None:
    if not isinstance(tag, int) or not 0 <= tag <= TAG_MAX:
        raise ValueError(f"active-message tag {tag!r} is outside 0..{TAG_MAX}")


@public
class ModuleBase:
    """A starting point for btl modules (see :class:`pmca.btl.BtlModule`).

    Subclasses implement the transport (``address``, ``add_procs``,
    ``del_procs``, ``sendi``, ``send``, ``put``, ``get``, ``progress``,
    ``finalize``) and call :meth:`deliver` for each active message received
    and :meth:`peer_lost` when a peer goes away.

    Active messages a subclass's ``sendi``/``send`` accept, and those it
    delivers or places, are counted per peer in :attr:`sent` and
    :attr:`received` (``[messages, bytes]``), the ``btl_<name>_*`` pvars.
    """

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        # Count at the one place every transport's sends pass, without a line in each.
        if "sendi" in cls.__dict__:
            cls.sendi = counting_sendi(cls.__dict__["sendi"])  # type: ignore[attr-defined]
        if "send" in cls.__dict__:
            cls.send = counting_send(cls.__dict__["send"])  # type: ignore[attr-defined]
        if "add_procs" in cls.__dict__:
            cls.add_procs = noting_peers(cls.__dict__["add_procs"])  # type: ignore[attr-defined]

    def __init__(self, name: str, limits: Limits, log: FilteringBoundLogger) -> None:
        self.name = name
        self.limits = limits
        self.log = log
        self._receivers: list[RecvCallback | None] = [None] * (TAG_MAX + 1)
        self._error_callbacks: list[ErrorCallback] = []
        self._placers: dict[int, Placer] = {}
        #: Per peer rank: ``[messages, bytes]`` of active messages sent.
        self.sent: dict[int, list[int]] = {}
        #: Per peer rank: ``[messages, bytes]`` of active messages received.
        self.received: dict[int, list[int]] = {}
        #: Ranks ``add_procs`` gave an endpoint for (the per-peer pvars' objects).
        self.reachable: set[int] = set()
        register_module(self)

    def peer_ranks(self) -> list[int]:
        """The ranks this module reaches or exchanged active messages with (pvar objects)."""
        return sorted(self.reachable | set(self.sent) | set(self.received))

    def register_recv(self, tag: int, callback: RecvCallback) -> None:
        _check_tag(tag)
        if self._receivers[tag] is not None:
            raise BtlError(f"btl {self.name}: active-message tag {tag} already has a receiver")
        self._receivers[tag] = callback

    def unregister_recv(self, tag: int) -> None:
        _check_tag(tag)
        self._receivers[tag] = None
        self._placers.pop(tag, None)

    def register_placer(self, tag: int, place: Placer) -> None:
        """Ask ``place`` where large active messages with ``tag`` go.

        ``place`` is a :data:`pmca.btl.Placer`.
        """
        _check_tag(tag)
        if self._receivers[tag] is None:
            raise BtlError(f"btl {self.name}: placer for tag {tag}, which has no receiver")
        self._placers[tag] = place

    def placement(
        self, endpoint: Endpoint, tag: int, head: memoryview, length: int
    ) -> Placement | None:
        """The tag placer's answer for a large active message (``None``: deliver it whole)."""
        place = self._placers.get(tag)
        if place is None:
            return None
        placement = place(endpoint, tag, head, length)
        if placement is not None:
            count_received(self.received, endpoint.rank, length)
        return placement

    def register_error(self, callback: ErrorCallback) -> None:
        self._error_callbacks.append(callback)

    def deliver(self, endpoint: Endpoint, tag: int, data: memoryview) -> None:
        """Hand one received active message to its tag's callback."""
        receiver = self._receivers[tag]
        if receiver is None:
            self.log.warning("active message for a tag nobody receives; dropped", tag=tag)
            return
        count_received(self.received, endpoint.rank, data.nbytes)
        receiver(endpoint, tag, data)

    def peer_lost(self, endpoint: Endpoint, error: BaseException) -> None:
        """Tell the error callbacks that ``endpoint`` is gone."""
        self.log.info("peer lost", rank=endpoint.rank, error=str(error))
        for callback in list(self._error_callbacks):
            callback(endpoint, error)

    def wait_fds(self) -> list[int] | None:
        return []

    def register_mem(self, endpoint: Endpoint | None, base: int, size: int) -> MemoryHandle:
        raise BtlError(f"btl {self.name} does not register memory (no PUT/GET)")

    def deregister_mem(self, handle: MemoryHandle) -> None:
        return None

    def _no_rdma(self, operation: str) -> BtlError:
        return BtlError(f"btl {self.name} has no {operation} (flags {self.limits.flags!r})")

    def put(
        self,
        endpoint: Endpoint,
        local: memoryview,
        local_handle: MemoryHandle | None,
        remote_address: int,
        remote_handle: bytes,
        callback: Completion,
    ) -> None:
        raise self._no_rdma("put")

    def get(
        self,
        endpoint: Endpoint,
        local: memoryview,
        local_handle: MemoryHandle | None,
        remote_address: int,
        remote_handle: bytes,
        callback: Completion,
    ) -> None:
        raise self._no_rdma("get")

    def del_procs(self, endpoints: Sequence[Endpoint]) -> None:
        return None
