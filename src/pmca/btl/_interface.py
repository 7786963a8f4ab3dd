"""The btl module interface, API 1.0.0 (after Open MPI's ``mca_btl_base_module_t``).

A btl component's ``query`` returns a module that satisfies
:class:`BtlModule`. The btl framework is ``multi``: every available module is
kept, and the bml picks, per peer, the modules that reach it (by exclusivity,
then latency). The message layer (:mod:`pmca.p2p`) only ever talks to modules
through the operations documented here, so a component shipped in a
separate distribution (entry point group ``pmca.btl``) plugs in exactly like
the built-in ``self``, ``sm`` and ``tcp``.

Life of a module, in the order pmca calls it:

1. ``query`` (component hook) builds the module; its :attr:`~BtlModule.limits`
   are read from the component's parameters with
   :func:`pmca.btl.base.register_limits` / :func:`pmca.btl.base.read_limits`.
2. :meth:`~BtlModule.address` is published in the modex (one allgather per
   session init, through the session's world).
3. :meth:`~BtlModule.add_procs` gets every peer with its own published address
   and answers, per peer, an endpoint or ``None`` (unreachable).
4. :meth:`~BtlModule.register_recv`, :meth:`~BtlModule.send`,
   :meth:`~BtlModule.sendi`, :meth:`~BtlModule.put`, :meth:`~BtlModule.get`,
   :meth:`~BtlModule.register_mem`, :meth:`~BtlModule.progress` while traffic
   flows.
5. :meth:`~BtlModule.del_procs` at session finalize, then
   :meth:`~BtlModule.finalize` at the framework's last close, before the
   component's ``close`` hook.

Threading: pmca calls a module from one thread at a time (the caller of
``progress`` or of a p2p operation, under the bml's lock). Callbacks run from
inside ``progress`` (or inside ``send``/``put``/``get`` when the operation
completes at once) and must not call back into the same module's
``progress``.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, NamedTuple, Protocol, runtime_checkable

from attrs import frozen

from .._public import public
from .._records import FrozenValue
from ..mca._errors import PmcaError
from ._limits import Flags, Limits

if TYPE_CHECKING:
    from typing_extensions import Buffer
else:  # ``collections.abc.Buffer`` is new in Python 3.12
    Buffer = object


@public
@frozen(eq=False, repr=False)
class Proc(FrozenValue):
    """A peer process as add_procs sees it.

    :param rank: the peer's rank in the session's world.
    :param host: an identifier of the peer's host (its boot id and hostname):
        equal hosts can share memory.
    :param pid: the peer's process id (for single-copy transports such as CMA).
    :param address: what the peer's module of this same component published
        with :meth:`BtlModule.address`; ``None`` if the peer has no such
        module (then it cannot be reached through this component).
    :param local: ``True`` for this process itself.
    """

    rank: int
    host: str
    pid: int
    address: bytes | None
    local: bool = False


@public
@runtime_checkable
class Endpoint(Protocol):
    """A module's handle on one reachable peer, returned by add_procs.

    Only ``rank`` is read by pmca; everything else is the module's own.
    """

    @property
    def rank(self) -> int: ...


@public
@frozen(eq=False, repr=False)
class MemoryHandle(FrozenValue):
    """A registration of local memory for put/get.

    :param base: first byte registered.
    :param size: bytes registered.
    :param packed: the remote key, sent to the peer inside the message layer's
        rendezvous header and given back as ``remote_handle`` to put/get on
        that peer. Opaque to everyone but the module that made it, and at most
        :data:`MAX_PACKED_HANDLE` bytes.
    :param token: the module's private state (the rcache registration).
    """

    base: int
    size: int
    packed: bytes
    token: object = None


MAX_PACKED_HANDLE = 64

#: ``callback(endpoint, tag, data)``: an active message arrived. ``data`` is
#: valid only during the call (copy what must outlive it).
RecvCallback = Callable[["Endpoint", int, memoryview], None]
#: ``callback(error)``: an operation finished; ``error`` is ``None`` on success.
Completion = Callable[[BaseException | None], None]
#: ``callback(endpoint, error)``: the module lost a peer (Open MPI's
#: ``btl_register_error``); every later operation on it fails.
ErrorCallback = Callable[["Endpoint", BaseException], None]

#: Bytes of a large active message a :data:`Placer` sees before answering
#: (all of it when the message is shorter).
PLACEMENT_HEAD = 64


@public
class Placement(NamedTuple):
    """Where the rest of a large active message goes (a :data:`Placer`'s answer)."""

    #: Leading bytes of the message the placer consumed from ``head`` (at most
    #: :data:`PLACEMENT_HEAD`); they are not written anywhere.
    skip: int
    #: The receiver's memory for the following ``target.nbytes`` bytes, exactly
    #: the rest of the message.
    target: memoryview
    #: Called once: ``None`` when ``target`` is filled, or the error that ended
    #: the transfer (the peer was lost, the module finalized).
    finished: Completion


#: ``place(endpoint, tag, head, length)``: a ``length``-byte active message with
#: ``tag`` is arriving and ``head`` holds its first bytes. Answer a
#: :class:`Placement` to have the rest received straight into the receiver's
#: memory (no staging copy), or ``None`` to have it delivered to the tag's
#: :data:`RecvCallback` as usual. Called under the same rules as the callback.
Placer = Callable[["Endpoint", int, memoryview, int], "Placement | None"]


@public
class QueuedSend(NamedTuple):
    """An active message a module accepted and has not handed to its transport yet.

    What the optional ``queued_sends`` operation answers (see
    :class:`BtlModule`): at finalize, what would be lost if the module closed
    now.
    """

    #: The peer it goes to.
    rank: int
    #: Its active-message tag.
    tag: int
    #: Its size (every part, as given to ``sendi``/``send``).
    nbytes: int
    #: Its first bytes (at most :data:`PLACEMENT_HEAD`): the message layer's header.
    head: bytes
    #: ``True`` when its sender was told it is sent (``sendi`` accepted it, or
    #: ``send`` had no callback): the module holds it and nobody waits for it.
    #: ``False`` when the ``send`` callback has yet to run.
    completed: bool


@public
class BtlError(PmcaError):
    """A byte transfer failed; the message names the module and the peer."""


@public
class PeerFailed(BtlError):
    """A peer died or its connection broke. ``rank`` names it."""

    def __init__(self, message: str, *, rank: int) -> None:
        super().__init__(message)
        self.rank = rank


@public
class PeerFinalized(PeerFailed):
    """The peer finalized its session (it left, told its peers so, and is not lost).

    What waits on it fails at once with this error instead of a timeout
    (a rendezvous send it never matched included, once its LEAVE arrived);
    ``after_error`` is true when it left because of an exception (a
    ``with Session`` block that raised, or interpreter exit).
    """

    def __init__(self, message: str, *, rank: int, after_error: bool = False) -> None:
        super().__init__(message, rank=rank)
        self.after_error = after_error


@public
class ModexError(BtlError):
    """A modex entry was malformed, foreign, or never arrived."""


@public
@runtime_checkable
class BtlModule(Protocol):
    """What every btl module provides (``mca_btl_base_module_t``, API 1.0.0).

    :class:`pmca.btl.base.ModuleBase` implements the bookkeeping shared by
    every module (the active-message table, error callbacks, the limits), so a
    component only writes its transport.

    One operation is optional: ``register_placer(tag, place)`` (see
    :data:`Placer`). A module that receives a large active message in pieces
    asks the tag's placer where the rest goes; the message layer registers
    one wherever the module has the method (:class:`~pmca.btl.base.ModuleBase`
    does), so a module without it works unchanged.

    Another is ``queued_sends(rank=None) -> list[QueuedSend]``: the active
    messages accepted and not yet handed to the transport, to ``rank`` or to
    every peer, oldest first per peer (see :class:`QueuedSend`); btl ``self``,
    ``sm``, ``tcp`` and ``ofi`` have it. Finalize uses it to say what could not be
    delivered; a module without it is taken to hold nothing back.

    With it goes ``drop_queued(rank) -> list[QueuedSend]``: take everything
    queued to ``rank`` and not yet handed to the transport off the queue, at
    once and for good (never sent later), run the pending ``send`` callbacks
    among it with an error, and answer the active messages dropped, as
    ``queued_sends`` would have. Finalize calls it when it gives up on a
    peer, so that a send it reports not delivered is never delivered after
    all, and one it counts as delivered (handed to the transport) does
    arrive if the peer reads. A frame of which the transport took a part
    cannot be taken back: btl ``tcp`` then ends its writes on that
    connection, and the peer discards the cut frame (it counts as dropped).
    A module without the operation keeps sending what it queued.

    Two more bound what a receiver keeps of a peer's unexpected messages:
    ``watch_holding(holding)`` and ``holding_eased(rank)`` (see
    :class:`pmca.btl.Holding`); btl ``tcp`` has them.

    Back-pressure: a send completes (``sendi`` answers ``True``, or the
    ``send`` callback runs) once the module owns the bytes, and the module
    then delivers them or reports the peer's failure. A module keeps what it
    owns bounded: when its queue to a peer is full, ``sendi`` answers
    ``False`` and ``send`` keeps the caller's buffers until the transport
    takes them, running the callback only then, so the message layer's
    blocking send waits (progressing) and ``isend`` returns a request that
    completes later. btl ``tcp`` bounds its copies by
    ``btl_tcp_send_queue_limit``; ``sm`` by its FIFO; ``ofi`` by the
    provider's transmit queue.
    """

    #: The component name (``"tcp"``); used in messages and in ``s.reach()``.
    name: str
    #: See :class:`Limits`.
    limits: Limits

    def address(self) -> bytes:
        """This process's address for this module, published in the modex.

        Called once per session init, after ``query``. Keep it short (it is
        gathered from every rank) and versioned: peers parse it in
        :meth:`add_procs` and must reject what they do not understand with
        :class:`ModexError`.
        """
        ...

    def add_procs(self, procs: Sequence[Proc]) -> list[Endpoint | None]:
        """Make the peers reachable: one endpoint (or ``None``) per proc, in order.

        ``procs`` includes this process (``local=True``). Connections may be
        made lazily, at the first send. Raise :class:`ModexError` for an
        address that does not parse, naming the rank; answer ``None`` for a
        peer this module simply cannot reach (another host for ``sm``).
        """
        ...

    def del_procs(self, endpoints: Sequence[Endpoint]) -> None:
        """Forget these peers: close their connections, free their resources.

        Operations still queued on them complete with an error.
        """
        ...

    def register_recv(self, tag: int, callback: RecvCallback) -> None:
        """Call ``callback(endpoint, tag, data)`` for each active message with ``tag``.

        One callback per tag; registering ``None``-equivalent is done with
        :meth:`unregister_recv`. Tags are ``0..TAG_MAX``.
        """
        ...

    def unregister_recv(self, tag: int) -> None:
        """Stop delivering ``tag``; messages that arrive for it are dropped and logged.

        Also forgets the tag's placer (see ``register_placer``).
        """
        ...

    def register_error(self, callback: ErrorCallback) -> None:
        """Call ``callback(endpoint, error)`` when a peer is lost."""
        ...

    def sendi(self, endpoint: Endpoint, tag: int, parts: Sequence[Buffer]) -> bool:
        """Send an active message now, if it can go out immediately.

        ``parts`` are concatenated on the wire (header, payload); their total
        is at most ``limits.eager_limit``. Returns ``True`` if the message was
        sent (the buffers may be reused), ``False`` if it would have to wait
        (the caller then uses :meth:`send`). Raises :class:`PeerFailed`.
        """
        ...

    def send(
        self,
        endpoint: Endpoint,
        tag: int,
        parts: Sequence[Buffer],
        callback: Completion | None = None,
    ) -> None:
        """Send an active message of at most ``limits.max_send_size`` bytes.

        With :attr:`Flags.SEND_INPLACE` the module keeps references to
        ``parts`` until ``callback`` runs and the caller must not modify them
        before; without it, the module copies them before returning. Messages
        on one endpoint with one tag arrive in the order they were sent.
        """
        ...

    def register_mem(self, endpoint: Endpoint | None, base: int, size: int) -> MemoryHandle:
        """Register ``[base, base + size)`` for put/get (through the rcache).

        ``endpoint`` is ``None`` for memory that any peer may access. With
        ``mpi_leave_pinned`` (and memory hooks) the registration stays cached
        after :meth:`deregister_mem`; without, it is released there.
        """
        ...

    def deregister_mem(self, handle: MemoryHandle) -> None:
        """Drop a reference taken by :meth:`register_mem`."""
        ...

    def put(
        self,
        endpoint: Endpoint,
        local: memoryview,
        local_handle: MemoryHandle | None,
        remote_address: int,
        remote_handle: bytes,
        callback: Completion,
    ) -> None:
        """Write ``local`` into the peer's registered memory at ``remote_address``.

        ``remote_handle`` is the peer's :attr:`MemoryHandle.packed`. At most
        ``limits.put_limit`` bytes. ``callback`` runs once the data is in the
        peer's memory (or the transfer failed).
        """
        ...

    def get(
        self,
        endpoint: Endpoint,
        local: memoryview,
        local_handle: MemoryHandle | None,
        remote_address: int,
        remote_handle: bytes,
        callback: Completion,
    ) -> None:
        """Read ``len(local)`` bytes of the peer's registered memory into ``local``.

        At most ``limits.get_limit`` bytes. The module must check that the
        range lies inside a registration the peer made (a peer never reads
        memory that was not offered). ``callback`` runs once ``local`` holds
        the data (or the transfer failed).
        """
        ...

    def progress(self) -> int:
        """Advance pending work without blocking; return the number of completions.

        Delivers received active messages to their callbacks and runs
        completion callbacks.
        """
        ...

    def wait_fds(self) -> list[int] | None:
        """File descriptors that become readable when :meth:`progress` has work.

        The progress engine sleeps on them (with ``select``) once a wait has
        spun for a while. ``[]`` means nothing ever arrives from outside (the
        ``self`` module); ``None`` means work can arrive without any
        descriptor becoming readable (shared-memory queues), so the engine
        keeps polling :meth:`progress` and only yields the CPU.

        A module may also define ``spin_fds()``, answering alike but arming
        nothing: while a wait spins, the message layer polls those
        descriptors in C with the GIL released between two progress calls
        (btl/tcp does; without it, or when it answers ``None``, the wait
        polls :meth:`progress` from Python). After such a poll the wait calls
        the module's optional ``progress_ready(ready)`` instead of
        :meth:`progress`, ``ready`` being the descriptors the poll found
        readable (other modules' included): it reads those without asking the
        kernel again.
        """
        ...

    def finalize(self) -> None:
        """Release everything: endpoints, registrations, sockets, segments.

        Called once, at the framework's last close, before the component's
        ``close`` hook. Must not raise for work still in flight: fail it.
        """
        ...


__all__ = [
    "MAX_PACKED_HANDLE",
    "PLACEMENT_HEAD",
    "BtlError",
    "BtlModule",
    "Buffer",
    "Completion",
    "Endpoint",
    "ErrorCallback",
    "Flags",
    "Limits",
    "MemoryHandle",
    "ModexError",
    "PeerFailed",
    "PeerFinalized",
    "Placement",
    "Placer",
    "Proc",
    "QueuedSend",
    "RecvCallback",
]
