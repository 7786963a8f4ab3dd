"""Bookkeeping every btl module shares: active-message table, error callbacks."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, ClassVar

from ..._public import public
from .._interface import (
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
from .._limits import TAG_MAX
from ._pvars import (
    FAILURES,
    INDEX,
    count_rdma,
    count_received,
    counting_send,
    counting_sendi,
    keeping_counts,
    noting_peers,
    peer_slot,
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
    delivers or places, are counted per peer in ``traffic`` (one list of
    integers per rank), read by the ``btl_<name>_*`` pvars through
    :meth:`counter`. A subclass that counts its sends itself, where it
    already handles each message, says so with ``counts_own_sends = True``
    and delivers with :meth:`hand_over` what it counted on receipt;
    otherwise its ``send``/``sendi`` are wrapped to count (one more call
    and a dict lookup per message). When its ``finalize`` has returned (or
    raised), what it counted is kept: the pvars go on adding it after the
    module is gone.
    """

    #: The class counts the active messages it sends itself (the built-in
    #: modules do, at their own call sites); when False, ``send`` and
    #: ``sendi`` are wrapped: one more call and a dict lookup per message.
    counts_own_sends: ClassVar[bool] = False
    #: The class whose ``send``/``sendi`` is the module's outermost (the last one
    #: defined along its classes): only that one's wrapper counts a message.
    send_counted_by: ClassVar[type | None] = None
    sendi_counted_by: ClassVar[type | None] = None

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        if "sendi" in cls.__dict__:
            cls.sendi_counted_by = cls
            if not cls.counts_own_sends:
                cls.sendi = counting_sendi(cls, cls.__dict__["sendi"])  # type: ignore[attr-defined]
        if "send" in cls.__dict__:
            cls.send_counted_by = cls
            if not cls.counts_own_sends:
                cls.send = counting_send(cls, cls.__dict__["send"])  # type: ignore[attr-defined]
        if "add_procs" in cls.__dict__:
            cls.add_procs = noting_peers(cls.__dict__["add_procs"])  # type: ignore[attr-defined]
        if "finalize" in cls.__dict__:
            cls.finalize = keeping_counts(cls, cls.__dict__["finalize"])  # type: ignore[attr-defined]

    def __init__(self, name: str, limits: Limits, log: FilteringBoundLogger) -> None:
        self.name = name
        self.limits = limits
        self.log = log
        self._receivers: list[RecvCallback | None] = [None] * (TAG_MAX + 1)
        self._error_callbacks: list[ErrorCallback] = []
        self._placers: dict[int, Placer] = {}
        #: Per peer rank: its counters (``SLOTS`` integers, see ``_pvars``).
        self.traffic: dict[int, list[int]] = {}
        #: Ranks ``add_procs`` gave an endpoint for (the per-peer pvars' objects).
        self.reachable: set[int] = set()
        #: ``counter`` is this class's: a pvar read takes ``traffic``'s slot itself.
        self.counts_in_traffic = type(self).counter is ModuleBase.counter
        register_module(self)

    def peer_traffic(self, rank: int) -> list[int]:
        """Peer ``rank``'s counters, made at the first use: a module holds on to
        this list next to the peer's connection or endpoint and counts on it."""
        return peer_slot(self.traffic, rank)

    def counter(self, name: str, rank: int) -> int:
        """The value of counter ``name`` (a ``btl_<component>_<name>`` pvar) for ``rank``.

        An override must still answer after ``finalize``: the counts are
        kept from it then.
        """
        slot = self.traffic.get(rank)
        return 0 if slot is None else slot[INDEX[name]]

    def peer_ranks(self) -> list[int]:
        """The ranks this module reaches or exchanged active messages with (pvar objects)."""
        return sorted(self.reachable | set(self.traffic))

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
            count_received(self.traffic, endpoint.rank, length)
        return placement

    def register_error(self, callback: ErrorCallback) -> None:
        self._error_callbacks.append(callback)

    def deliver(self, endpoint: Endpoint, tag: int, data: memoryview) -> None:
        """Hand one received active message to its tag's callback."""
        if self._receivers[tag] is not None:
            count_received(self.traffic, endpoint.rank, data.nbytes)
        self.hand_over(endpoint, tag, data)

    def hand_over(self, endpoint: Endpoint, tag: int, data: memoryview) -> None:
        """:meth:`deliver` for a module that counted the message already."""
        receiver = self._receivers[tag]
        if receiver is None:
            self.log.warning("active message for a tag nobody receives; dropped", tag=tag)
            return
        receiver(endpoint, tag, data)

    def count_rdma(self, endpoint: Endpoint, nbytes: int) -> None:
        """Count one put or get of ``nbytes`` to ``endpoint``'s peer (as it is issued)."""
        count_rdma(self.traffic, endpoint.rank, nbytes)

    def peer_lost(self, endpoint: Endpoint, error: BaseException) -> None:
        """Tell the error callbacks that ``endpoint`` is gone."""
        self.log.info("peer lost", rank=endpoint.rank, error=str(error))
        self.peer_traffic(endpoint.rank)[FAILURES] += 1  # the call comes before the addition
        for callback in list(self._error_callbacks):
            callback(endpoint, error)

    def wait_fds(self) -> list[int] | None:
        return []

    def register_mem(self, endpoint: Endpoint | None, base: int, size: int) -> MemoryHandle:
        raise BtlError(f"btl {self.name} does not register memory (no PUT/GET)")

    def deregister_mem(self, handle: MemoryHandle) -> None:
        return None

    def dropped(self, rank: int) -> BtlError:
        """The error of a send to ``rank`` taken off this module's queue by
        ``drop_queued`` (see :class:`pmca.btl.BtlModule`)."""
        return BtlError(
            f"btl {self.name}: a send to rank {rank} was dropped unsent "
            "(its sender's finalize gave up delivering to that rank)"
        )

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
