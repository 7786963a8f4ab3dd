"""Typed view of libpmca_btl_sm.so: one process's segment and its peers.

The library is opened by the component loader (so that a dso-mode ``sm``
really unloads it); this wrapper only receives the handle.  Most operations
are called with the GIL held (``PYFUNCTYPE``); ``wait``, the CMA copies and
``lane_receive_into`` release it, since they may block or move many bytes.
The GIL is not what makes the context safe: callers serialise every
operation on one transport, and the handling of what :meth:`Transport.poll`
delivered, with one lock (the sm module's, see ``_module.py``).

Peers' segments are not trusted (see ``sm.h``): an entry of a peer that
names no fragment of it, or a producer that died holding the FIFO's head,
is reported as that peer's fault (:class:`PeerFault`), never a crash or a
hang; so is a peer's segment that a send finds overwritten, and this
process's own, found overwritten, is :class:`SegmentOverwritten`.
"""

from __future__ import annotations

import ctypes
import errno
import os
from collections.abc import Callable
from typing import Any

import attrs

from ..._records import FrozenValue, Record
from ..base._buffers import flat_bytes
from ._bindings import COUNT_INDEX, COUNTS
from ._bindings import STAT_NAMES as _STAT_NAMES
from ._bindings import Closed as _Closed
from ._bindings import Config as _Config
from ._bindings import Delivery as _Delivery
from ._bindings import Functions as _Functions
from ._bindings import Stats as _Stats
from ._defaults import LIBRARY_NAME, library_path
from ._faults import PeerClosed, PeerFault, SegmentOverwritten, TransportError, fault

#: The message layer's match header that lanes write and read (pmca.p2p._protocol.MATCH).
MATCH_HEADER_BYTES = 24

_VIA = {1: "pidfd_getfd", 2: "/proc/<pid>/fd"}
#: A segment's closing word when its owner found it overwritten (sm.h's SM_BROKEN).
_BROKEN = 2


@attrs.frozen(eq=False, repr=False)
class SegmentAddress(FrozenValue):
    """What a process publishes so that local peers can map its segment."""

    pid: int
    fd: int  # the segment's memfd in the owner
    wake_fd: int  # the owner's wake pipe (write end), written when it sleeps in select()
    size: int
    base: int  # where the owner maps it (CMA probes read the magic there)


@attrs.frozen(eq=False, repr=False)
class TransportConfig(FrozenValue):
    """Sizes of one process's segment."""

    fifo_capacity: int = 1024
    eager_size: int = 4096
    eager_count: int = 64
    max_size: int = 32768
    max_count: int = 32

    def __attrs_post_init__(self) -> None:
        if self.fifo_capacity < 2 or self.fifo_capacity & (self.fifo_capacity - 1):
            raise ValueError(f"fifo_capacity must be a power of two >= 2, not {self.fifo_capacity}")
        if not 0 < self.eager_size <= self.max_size:
            raise ValueError(
                f"need 0 < eager_size <= max_size, got {self.eager_size} and {self.max_size}"
            )
        if self.eager_count < 1 or self.max_count < 1:
            raise ValueError("each fragment pool needs at least one fragment")


def _error(code: int, what: str) -> TransportError:
    return TransportError(code, f"{what}: {os.strerror(code)}")


def buffer_pointer(data: Any) -> tuple[Any, int]:
    """A ctypes-passable pointer to ``data``'s bytes and their count.

    bytes pass as they are; writable buffers (bytearray, numpy arrays,
    memoryviews of them) without a copy; other read-only buffers are
    copied once.  The returned object keeps the memory alive.
    """
    if type(data) is bytes:
        return data, len(data)
    view = data if type(data) is memoryview else memoryview(data)
    if not view.c_contiguous:
        raise ValueError("sm sends contiguous buffers only")
    size = view.nbytes
    if size == 0:
        return None, 0
    if view.readonly:
        return view.tobytes(), size
    return (ctypes.c_char * size).from_buffer(view), size


#: Up to this, a send copies a buffer into the transport's staging area rather
#: than wrap its memory: cheaper than building a ctypes array over it, and
#: unlike a copy to bytes it allocates nothing per message.
STAGED_MAX = 4096


class Staging:
    """A buffer a send's body is copied into before the C side copies it on (the
    context's lock serialises its users): :attr:`view` to copy into, and
    :attr:`pointer` that passes its address to a C call with or without argtypes."""

    __slots__ = ("_memory", "pointer", "view")

    def __init__(self, size: int) -> None:
        self._memory = (ctypes.c_char * size)()
        self.view = memoryview(self._memory).cast("B")
        self.pointer = ctypes.byref(self._memory)


def buffer_address(data: Any) -> tuple[int, int, Any]:
    """``(address, nbytes, keepalive)`` of a contiguous buffer (for CMA)."""
    pointer, size = buffer_pointer(data)
    if size == 0:
        return 0, 0, pointer
    if type(pointer) is bytes:
        address = ctypes.cast(ctypes.c_char_p(pointer), ctypes.c_void_p).value
    else:
        address = ctypes.addressof(pointer)
    return int(address or 0), size, pointer


@attrs.frozen(eq=False, repr=False)
class LaneCalls(Record):
    """What :meth:`Transport.lane_calls` hands a lane: the context, the lane's
    number and lane.c's entry points (called with ``context`` and ``lane`` first,
    see ``_lane.py``) and the landing buffer of its receives."""

    context: Any
    lane: int
    send: Any
    send_rget: Any
    receive: Any
    receive_into: Any
    send_buffer: Any
    receive_buffer: Any
    send_rget_buffer: Any
    await_fin: Any
    landing: memoryview


class Transport:
    """This process's segment and its mappings of the peers' segments.

    The segment exists (and its :attr:`address` can be published) from
    construction on; :meth:`bind` names this process among its peers (its
    rank) before any :meth:`attach`.
    """

    def __init__(self, lib: ctypes.CDLL, config: TransportConfig | None = None) -> None:
        self.config = config or TransportConfig()
        self.ident = 0
        self._fn: Any = _Functions(lib)
        self._send = self._fn.send
        self._poll = self._fn.poll
        raw = _Config(
            self.config.fifo_capacity,
            self.config.eager_size,
            self.config.eager_count,
            self.config.max_size,
            self.config.max_count,
        )
        error = ctypes.c_int(0)
        handle = self._fn.create(ctypes.byref(raw), ctypes.byref(error))
        if not handle:
            raise _error(error.value, "cannot create the sm segment")
        self._ctx: int | None = handle
        self._delivery = _Delivery()
        self._delivery_ref = ctypes.byref(self._delivery)
        self._size = int(self._fn.segment_size(handle))
        self._base = int(self._fn.segment_base(handle, 0))
        self._sizes: dict[int, int] = {}
        self._pids: dict[int, int] = {}
        self._views: dict[int, memoryview] = {}
        self._magic = bytes(self._view(self._base, self._size)[:8])
        if self._fn.count_kinds() != len(COUNTS):
            raise TransportError(
                errno.EPROTO, f"{LIBRARY_NAME}'s per-peer counters do not match this pmca version"
            )
        #: Per peer id, ``len(COUNTS)`` counters the C side adds to (see
        #: :meth:`count`): owned here, so they outlive the context, and read
        #: in place without a call.
        self._counts: ctypes.Array[ctypes.c_uint64] = (ctypes.c_uint64 * 0)()
        self.max_payload = self.config.max_size
        self._on_close: list[Callable[[], None]] = []
        #: Where a send's small body is copied first (:meth:`send`, and the lanes': the
        #: size of the lanes' landing buffer once one is opened, see :meth:`lane_calls`).
        self.staging = Staging(STAGED_MAX)
        if self._fn.match_header_size() != MATCH_HEADER_BYTES:
            raise TransportError(
                errno.EPROTO, f"{LIBRARY_NAME}'s match header does not match this pmca version"
            )

    @staticmethod
    def _view(base: int, size: int) -> memoryview:
        return memoryview((ctypes.c_ubyte * size).from_address(base)).cast("B")

    def bind(self, ident: int, slots: int) -> None:
        """Be ``ident`` (the rank) among ``slots`` processes; no peer may be attached."""
        status = self._fn.bind(self._ctx, ident, slots)
        if status != 0:
            raise _error(-status, f"cannot bind the sm segment as {ident} of {slots}")
        self.ident = ident
        self._counts = (ctypes.c_uint64 * (slots * len(COUNTS)))()
        self._fn.set_counts(self._ctx, ctypes.addressof(self._counts), slots)
        self._sizes = {ident: self._size}
        self._views = {ident: self._view(self._base, self._size)}

    @property
    def address(self) -> SegmentAddress:
        return SegmentAddress(
            os.getpid(),
            int(self._fn.memfd(self._ctx)),
            int(self._fn.wake_write_fd(self._ctx)),
            self._size,
            self._base,
        )

    @property
    def closed(self) -> bool:
        return self._ctx is None

    def attach(self, ident: int, address: SegmentAddress, *, allow_getfd: bool = True) -> str:
        """Map peer ``ident``'s segment; returns how its memfd was opened."""
        how = ctypes.c_int(0)
        status = self._fn.attach(
            self._ctx,
            ident,
            address.pid,
            address.fd,
            address.wake_fd,
            address.size,
            int(allow_getfd),
            ctypes.byref(how),
        )
        if status != 0:
            code = -status
            if code == errno.EPROTO:
                reason = "what is mapped there is not a pmca sm segment of this version"
            elif code == errno.EBADMSG:
                problem = bytes(self._fn.attach_problem(self._ctx) or b"").decode()
                reason = f"its segment's layout cannot be trusted: {problem}"
            else:
                reason = os.strerror(code)
            raise TransportError(
                code,
                f"cannot map the sm segment of peer {ident} "
                f"(pid {address.pid}, fd {address.fd}, {address.size} bytes): {reason}",
            )
        self._sizes[ident] = address.size
        self._pids[ident] = address.pid
        self._views[ident] = self._view(int(self._fn.segment_base(self._ctx, ident)), address.size)
        return _VIA[how.value]

    def cma_refusal(self, address: SegmentAddress) -> int:
        """0 if CMA reads from that peer work (its magic reads back), else an errno."""
        here = ctypes.c_uint64(0)
        moved = int(self._fn.cma(address.pid, 0, ctypes.addressof(here), address.base, 8))
        if moved < 0:
            return -moved
        return 0 if here.value == int.from_bytes(self._magic, "little") else errno.EIO

    def detach(self, ident: int) -> None:
        self._views.pop(ident, None)
        self._sizes.pop(ident, None)
        status = self._fn.detach(self._ctx, ident)
        if status != 0 and status != -errno.ENOENT:
            raise _error(-status, f"cannot detach sm peer {ident}")

    def attached(self, ident: int) -> bool:
        return ident in self._views

    def alive(self, ident: int) -> bool:
        return bool(self._fn.peer_alive(self._ctx, ident))

    def send(self, ident: int, tag: int, head: bytes, body: Any = b"") -> bool:
        """Queue one message; False when no fragment or FIFO slot is free yet."""
        pointer, size = self._send_pointer(body)
        status = self._send(self._ctx, ident, tag, head, len(head), pointer, size)
        if status == 0:
            return True
        if status == -errno.EAGAIN:
            return False
        if status == -errno.EMSGSIZE:
            raise ValueError(
                f"sm message of {len(head) + size} bytes exceeds max_send_size {self.max_payload}"
            )
        if status == -errno.ESHUTDOWN:
            raise PeerClosed(ident)
        if status == -errno.ECONNRESET:
            raise self._broken_fault(ident)
        if status == -errno.EBADMSG:
            raise PeerFault(
                errno.EBADMSG,
                f"the sm segment of rank {ident} (pid {self._pids.get(ident, '?')}) was "
                f"overwritten by another process: {self._fault_text()}",
                ident,
            )
        raise _error(-status, f"sm send to peer {ident}")

    def _send_pointer(self, data: Any) -> tuple[Any, int]:
        """Like :func:`buffer_pointer`, for a send (the C side copies at once)."""
        if type(data) is bytes:
            return data, len(data)
        view = data if type(data) is memoryview else memoryview(data)
        size = view.nbytes
        if size <= STAGED_MAX and view.c_contiguous:
            staging = self.staging
            staging.view[:size] = flat_bytes(view)
            return staging.pointer, size
        return buffer_pointer(view)

    def _fault_text(self) -> str:
        return bytes(self._fn.fault(self._ctx) or b"").decode(errors="replace")

    def broken(self, ident: int) -> PeerFault | None:
        """Peer ``ident``'s fault when it said it found its own segment overwritten
        (it reads nothing any more), else None; one load, for idle checks."""
        if self._fn.peer_closing(self._ctx, ident) != _BROKEN:
            return None
        return self._broken_fault(ident)

    def _broken_fault(self, ident: int) -> PeerFault:
        return PeerFault(
            errno.ECONNRESET,
            f"rank {ident} (pid {self._pids.get(ident, '?')}) found its own sm segment "
            "overwritten by another process and reads nothing any more",
            ident,
        )

    def overwritten(self) -> SegmentOverwritten:
        """What :meth:`poll` raises once this process's own segment was found overwritten."""
        return SegmentOverwritten(
            errno.EUCLEAN,
            f"the sm segment of rank {self.ident} (this process, pid {os.getpid()}) was "
            f"overwritten by another process: {self._fault_text()}; its receive FIFO "
            "cannot be read any more",
        )

    def poll(self) -> tuple[int, int, memoryview] | None:
        """Next message ``(source, tag, payload)``, valid until the next poll/release."""
        status = self._poll(self._ctx, self._delivery_ref)
        if status == 1:
            d = self._delivery
            return d.source, d.tag, self._views[d.source][d.offset : d.offset + d.length]
        if status == 0:
            return None
        if status == -errno.EUCLEAN:
            raise self.overwritten()
        raise fault(status, self._delivery.source) or _error(-status, "sm receive")

    def release(self) -> None:
        self._fn.release(self._ctx)

    def claim_only(self, ident: int) -> None:
        """Claim a cell of peer ``ident``'s FIFO and never fill it, as a producer killed
        mid-send leaves it (for tests of the reader; send nothing afterwards)."""
        status = self._fn.claim_only(self._ctx, ident)
        if status != 0:
            raise _error(-status, f"cannot claim a FIFO cell of sm peer {ident}")

    def segment(self, ident: int) -> memoryview | None:
        """Peer ``ident``'s mapped segment (``None`` once detached)."""
        return self._views.get(ident)

    def lane_calls(self, ident: int, am_tag: int) -> LaneCalls:
        """lane.c's entry points for peer ``ident``'s lane for ``am_tag``, and the
        landing buffer of its receives.

        The context (a prebuilt reference to it) and the landing buffer are
        freed at :meth:`close`: whoever holds these must stop using them
        then (see :meth:`on_close`).
        """
        if self._ctx is None:
            raise TransportError(errno.EBADF, "sm transport is closed (lane_calls called)")
        lane = int(self._fn.lane(ident, am_tag))
        if lane == 0xFFFFFFFF:
            raise ValueError(f"no sm lane for peer {ident} and active-message tag {am_tag}")
        size = ctypes.c_uint64(0)
        landing = self._fn.landing(self._ctx, ctypes.byref(size))
        if not landing:
            raise _error(errno.ENOMEM, "cannot allocate the sm lanes' landing buffer")
        fn = self._fn
        return LaneCalls(
            # a reference to the context's first byte passes its address as it is; a
            # c_void_p would be converted anew at every call
            ctypes.byref(ctypes.c_char.from_address(self._ctx)),
            lane,
            fn.lane_send,
            fn.lane_send_rget,
            fn.lane_receive,
            fn.lane_receive_into,
            fn.lane_send_buffer,
            fn.lane_receive_buffer,
            fn.lane_send_rget_buffer,
            fn.lane_await_fin,
            self._view(int(landing), size.value),
        )

    def block_lanes(self, blocked: bool) -> None:
        """Stop (or let again) every lane: sends are queued behind them."""
        self._fn.block_lanes(self._ctx, int(blocked))

    def set_lane_cma(self, allowed: bool) -> None:
        """Whether lane receives read rendezvous payloads themselves with CMA (lane.c)."""
        self._fn.set_lane_cma(self._ctx, int(allowed))

    def set_lane_spin(self, seconds: float) -> None:
        """How long a lane receive polls the FIFO before it gives up (lane.c)."""
        self._fn.set_lane_spin(self._ctx, max(0, int(seconds * 1e9)))

    def on_close(self, action: Callable[[], None]) -> None:
        """Run ``action`` at :meth:`close`, before the context is freed."""
        self._on_close.append(action)

    def pending(self) -> bool:
        return bool(self._fn.pending(self._ctx))

    def wait(self, timeout: float | None, spins: int = 2000) -> bool:
        """Block (spin briefly, then futex) until a message waits or ``timeout`` s pass."""
        nanoseconds = -1 if timeout is None else max(0, int(timeout * 1e9))
        return bool(self._fn.wait(self._ctx, nanoseconds, spins))

    @property
    def wake_fd(self) -> int:
        """Readable while armed and a message has arrived (for select())."""
        return int(self._fn.wake_read_fd(self._ctx))

    def arm(self) -> bool:
        """About to sleep on :attr:`wake_fd`; True if a message already waits."""
        return bool(self._fn.arm(self._ctx))

    def disarm(self) -> None:
        """Awake: senders stop writing :attr:`wake_fd`, and it is emptied."""
        self._fn.disarm(self._ctx)

    def interrupt(self) -> None:
        self._fn.interrupt(self._ctx)

    def count(self, ident: int, name: str) -> int:
        """Peer ``ident``'s counter ``name`` (one of :data:`COUNTS`), read in place.

        The C side adds to it under the lock that serialises the context;
        this reads one aligned word, so it is never torn, whichever thread
        reads, and stays readable after :meth:`close`.
        """
        index = ident * len(COUNTS) + COUNT_INDEX[name]
        counts = self._counts
        return int(counts[index]) if 0 <= index < len(counts) else 0

    def stats(self) -> dict[str, int]:
        raw = _Stats()
        self._fn.stats(self._ctx, ctypes.byref(raw))
        return {name: int(getattr(raw, name)) for name in _STAT_NAMES}

    def cma(self, pid: int, *, write: bool, local: int, remote: int, length: int) -> None:
        """Copy ``length`` bytes between ``local`` here and ``remote`` in ``pid``."""
        moved = int(self._fn.cma(pid, int(write), local, remote, length))
        if moved != length:
            code = -moved if moved < 0 else errno.EIO
            verb = "process_vm_writev to" if write else "process_vm_readv from"
            raise _error(code, f"{verb} pid {pid} ({length} bytes at {remote:#x})")

    def close(self) -> None:
        """Unmap every segment and close the memfd (idempotent)."""
        if self._ctx is None:
            return
        actions, self._on_close = self._on_close, []
        for action in actions:
            action()
        self._views.clear()
        self._fn.destroy(self._ctx)
        self._ctx = None
        self._fn = _Closed()
        self._send = self._fn.send
        self._poll = self._fn.poll


__all__ = [
    "COUNTS",
    "COUNT_INDEX",
    "LIBRARY_NAME",
    "STAGED_MAX",
    "LaneCalls",
    "PeerClosed",
    "PeerFault",
    "SegmentAddress",
    "SegmentOverwritten",
    "Staging",
    "Transport",
    "TransportConfig",
    "TransportError",
    "buffer_address",
    "buffer_pointer",
    "fault",
    "library_path",
]
