"""The process-wide native hook backend: patch, restore, inspect; the ring's consumer side."""

from __future__ import annotations

import ctypes
import errno
import os
import threading
from typing import TYPE_CHECKING, Final, cast

import attrs

from .._public import public
from .._records import FrozenValue
from . import _abi
from ._abi import SYMBOLS, DrainResult, EventStruct, RingStats, SiteReport, State, Status
from ._errors import NativeUnavailable, PatchRefused

if TYPE_CHECKING:
    from ._events import Drained
    from ._sites import PatchSite

#: Bytes per event record the ring hands over (C ``struct pmca_event``).
_RECORD_BYTES: Final = ctypes.sizeof(EventStruct)

#: Pull everything published so far.
EVERYTHING: Final = 2**64 - 1
#: How long a pull waits for a producer that claimed a slot but has not
#: published it yet before giving the slot up (reported as overflow).  The
#: producer is a few instructions from publishing unless it was preempted;
#: a 2-core machine under load can keep it off the CPU for several ms, and
#: giving up costs every consumer its whole cache, so be patient.
STALL_WAIT_NS: Final = 20_000_000


def _reason(report: SiteReport) -> str:
    reason = bytes(report.reason).split(b"\0", 1)[0].decode(errors="replace")
    if report.sys_errno:
        reason = f"{reason} ({os.strerror(report.sys_errno)})"
    return reason


@public
@attrs.frozen(eq=False, repr=False)
class Pulled(FrozenValue):
    """Events taken from the ring by one :meth:`HookBackend.pull`.

    ``data`` holds ``count`` records for the consecutive ring positions
    from ``first``.  ``dropped`` counts events lost since the previous pull
    (a full ring, a slot given up on, a fork), ``abandoned`` the claimed slots
    this pull gave up on.
    """

    data: memoryview
    first: int
    count: int
    dropped: int
    dropped_total: int
    abandoned: int
    next_position: int


@public
@attrs.frozen(eq=False, repr=False)
class RingState(FrozenValue):
    """Counters of the native ring (cumulative for the process)."""

    capacity: int
    published: int
    consumed: int
    dropped: int
    abandoned: int
    incomplete_drains: int
    producer_wakeups: int
    late_publishes: int

    @property
    def pending(self) -> int:
        return self.published - self.consumed


@public
class HookBackend:
    """Drives libpmca_hooks.so.  Get the process-wide instance with :func:`backend`.

    Patching is serialised in C; this object holds no patch state of its own,
    so every answer reflects the live bytes.
    """

    def __init__(self, lib: ctypes.CDLL) -> None:
        self._lib = lib
        self._consumer_lock = threading.Lock()
        self._result = DrainResult()
        # Live views of the ring's producer position and drop counter: a drain
        # with nothing to do reads them instead of calling into the library.
        self.head_word = ctypes.c_uint64.from_address(lib.pmca_hooks_head_address())
        self.dropped_word = ctypes.c_uint64.from_address(lib.pmca_hooks_dropped_address())
        self._drops_seen = self.snapshot()[1]
        self._pulled_to = self.ring_state().consumed

    @property
    def symbols(self) -> tuple[str, ...]:
        """The libc functions this backend can hook."""
        return SYMBOLS

    @property
    def membarrier_mode(self) -> str:
        """How code changes are made visible to other cores."""
        mode: bytes = self._lib.pmca_hooks_membarrier_mode()
        return mode.decode()

    def _index(self, symbol: str) -> int:
        try:
            return SYMBOLS.index(symbol)
        except ValueError:
            raise ValueError(
                f"{symbol!r} is not hookable; choose from {', '.join(SYMBOLS)}"
            ) from None

    def address(self, symbol: str) -> int:
        """libc's entry point of ``symbol`` (0 if libc does not export it)."""
        return int(self._lib.pmca_hooks_symbol_address(self._index(symbol)))

    def install(self, symbol: str) -> PatchSite:
        """Redirect libc's ``symbol`` to pmca's hook; idempotent.

        Raises :class:`PatchRefused` when the prologue is unknown, already
        patched by someone else, has no usable padding, or the text cannot
        be made writable.
        """
        report = SiteReport()
        status = self._lib.pmca_hooks_patch(self._index(symbol), ctypes.byref(report))
        if status in (Status.OK, Status.ALREADY_INSTALLED):
            from ._sites import site_from

            return site_from(symbol, report)
        raise PatchRefused(symbol, report.function, bytes(report.found), _reason(report))

    def restore(self, site: PatchSite) -> bool:
        """Put back the bytes ``site`` replaced.

        False when they are no longer ours (someone patched over us): they are
        left alone and our hook stays reachable as a pure pass-through.
        Restoring a site that is already restored is a no-op returning True.
        """
        report = SiteReport()
        status = self._lib.pmca_hooks_restore(self._index(site.symbol), ctypes.byref(report))
        if status == Status.OK:
            return True
        if status == Status.NOT_INSTALLED:
            return ctypes.string_at(site.patch_address, len(site.original)) == site.original
        return False

    def site(self, symbol: str) -> PatchSite | None:
        """The live patch of ``symbol``, or None when it is not installed."""
        report = SiteReport()
        self._lib.pmca_hooks_inspect(self._index(symbol), ctypes.byref(report))
        if report.state != State.INSTALLED:
            return None
        from ._sites import site_from

        return site_from(symbol, report)

    def state(self, symbol: str) -> str:
        """``"idle"``, ``"installed"`` or ``"orphaned"`` (overwritten by someone else)."""
        report = SiteReport()
        self._lib.pmca_hooks_inspect(self._index(symbol), ctypes.byref(report))
        return State(report.state).name.lower()

    def is_installed(self, symbol: str) -> bool:
        """Whether our jump, padding jump and trampoline are all live and intact."""
        return bool(self._lib.pmca_hooks_verify(self._index(symbol)))

    def prologue(self, symbol: str, n: int = 16) -> bytes:
        """The current first ``n`` bytes of libc's ``symbol``."""
        address = self.address(symbol)
        if not address:
            raise NativeUnavailable(f"{symbol} is not exported by libc.so.6")
        return ctypes.string_at(address, n)

    def calls(self, symbol: str) -> int:
        """How many times the hook of ``symbol`` ran (whether or not it recorded)."""
        return int(self._lib.pmca_hooks_calls(self._index(symbol)))

    # -- the ring: configuration and its one consumer ----------------------------

    def configure_ring(self, capacity: int) -> int:
        """Allocate the ring with ``capacity`` slots unless it already exists.

        Returns the capacity in force: the ring is allocated once per process
        and never freed (hooks may run at any time), so a later call cannot
        resize it.  Raises ValueError for a capacity that is not a power of
        two between 1024 and 2**26.
        """
        result = int(self._lib.pmca_hooks_configure_ring(capacity))
        if result == -errno.EINVAL:
            raise ValueError(
                f"ring capacity {capacity} is not a power of two between 1024 and {2**26}"
            )
        if result < 0:
            raise NativeUnavailable(
                f"cannot allocate the release-event ring: {os.strerror(-result)}"
            )
        return result

    @property
    def default_capacity(self) -> int:
        return int(self._lib.pmca_hooks_default_ring_capacity())

    def ensure_ring(self) -> int:
        """Allocate the ring at its default size unless it exists; returns its capacity."""
        return self.configure_ring(self.default_capacity)

    @property
    def capacity(self) -> int:
        """How many events the ring holds before dropping (allocating it if needed)."""
        return self.ensure_ring()

    def ring_state(self) -> RingState:
        stats = RingStats()
        self._lib.pmca_hooks_ring_stats(ctypes.byref(stats))
        return RingState(*(int(getattr(stats, name)) for name, _ in RingStats._fields_))

    def snapshot(self) -> tuple[int, int]:
        """(position of the next event to be published, events dropped so far)."""
        dropped = ctypes.c_uint64(0)
        head = int(self._lib.pmca_hooks_snapshot(ctypes.byref(dropped)))
        return head, dropped.value

    @property
    def pulled_to(self) -> int:
        """Ring position up to which events were pulled (by this process's consumer)."""
        return self._pulled_to

    @property
    def drops_seen(self) -> int:
        """Drops already reported by a pull."""
        return self._drops_seen

    def pull(
        self, until: int = EVERYTHING, max_events: int = 4096, stall_wait_ns: int = STALL_WAIT_NS
    ) -> Pulled:
        """Take the events at ring positions before ``until`` (at most ``max_events``).

        The ring has one consumer at a time; concurrent callers queue on a
        lock.  Events taken here are gone for everyone else: applications
        drain through :func:`pmca.native.dispatcher`.
        """
        if max_events <= 0:
            raise ValueError("max_events must be positive")
        with self._consumer_lock:
            wanted = until - self._pulled_to
            if 0 < wanted < max_events:
                max_events = wanted
            buffer = bytearray(max_events * _RECORD_BYTES)
            window = (ctypes.c_char * len(buffer)).from_buffer(buffer)
            result = self._result
            status = self._lib.pmca_hooks_drain(
                ctypes.addressof(window), max_events, until, stall_wait_ns, ctypes.byref(result)
            )
            del window  # releases the buffer export
            if status == -errno.EBUSY:
                raise RuntimeError("another consumer is draining the release-event ring")
            dropped = result.dropped_total - self._drops_seen
            self._drops_seen = result.dropped_total
            self._pulled_to = max(self._pulled_to, result.next_position)
            count = result.count
            return Pulled(
                data=memoryview(buffer)[: count * _RECORD_BYTES],
                first=result.first_position,
                count=count,
                dropped=dropped,
                dropped_total=result.dropped_total,
                abandoned=result.abandoned,
                next_position=result.next_position,
            )

    def drain(self, max_events: int = 4096) -> Drained:
        """Take up to ``max_events`` events as :class:`ReleaseEvent` objects.

        A diagnostic convenience (one object per event); applications drain
        through :func:`pmca.native.dispatcher`.
        """
        # Imported here: a session that never drains does not build the event types.
        from ._events import KIND_NAMES, Drained, ReleaseEvent, ReleaseKind

        pulled = self.pull(EVERYTHING, max_events)
        records = memoryview(pulled.data).cast("Q")
        halves = memoryview(pulled.data).cast("I")
        events = tuple(
            ReleaseEvent(
                records[3 * i],
                records[3 * i + 1],
                cast(ReleaseKind, KIND_NAMES[halves[6 * i + 4]]),
                bool(halves[6 * i + 5]),
            )
            for i in range(pulled.count)
        )
        return Drained(events=events, overflowed=pulled.dropped > 0, dropped=pulled.dropped)

    def dropped_total(self) -> int:
        """Events lost since the library was loaded."""
        return self.snapshot()[1]

    def pending(self) -> int:
        """Events in the ring (claimed or published) not yet pulled."""
        return self.ring_state().pending

    def wait(self, threshold: int, timeout: float) -> int:
        """Sleep (without the GIL) until ``threshold`` events are pending or ``timeout`` passes.

        Returns 1 for "threshold reached", 2 for another wake-up, 0 for the timeout.
        """
        return int(self._lib.pmca_hooks_wait(max(1, threshold), int(timeout * 1e9)))

    def wake_listeners(self) -> None:
        """End every :meth:`wait` in progress."""
        self._lib.pmca_hooks_wake_listeners()

    def publish_synthetic(
        self, count: int, address: int = 0x1000, length: int = 4096, stride: int = 4096
    ) -> int:
        """Publish ``count`` made-up munmap events (tests and benchmarks); returns how many fit."""
        return int(self._lib.pmca_hooks_publish_synthetic(1, address, length, count, stride))

    def set_enabled(self, enabled: bool) -> None:
        """False turns every installed hook into a pure system-call pass-through."""
        self._lib.pmca_hooks_set_enabled(1 if enabled else 0)

    @property
    def enabled(self) -> bool:
        """Whether installed hooks record events."""
        return bool(self._lib.pmca_hooks_enabled())


_singleton_lock = threading.Lock()
_singleton: HookBackend | None = None


@public
def backend() -> HookBackend:
    """The process-wide hook backend; raises :class:`NativeUnavailable` with the reason."""
    global _singleton
    with _singleton_lock:
        if _singleton is None:
            _singleton = HookBackend(_abi.load())
        return _singleton


def _reset_after_fork() -> None:
    # A lock held by another thread at fork() (the listener drains often)
    # would stay held forever in the child, which has only the forking thread.
    global _singleton_lock
    _singleton_lock = threading.Lock()
    if _singleton is not None:
        _singleton._consumer_lock = threading.Lock()


os.register_at_fork(after_in_child=_reset_after_fork)


@public
def available() -> bool:
    """Whether the native hook backend can be used in this process."""
    return unavailable_reason() is None


@public
def unavailable_reason() -> str | None:
    """Why the native hook backend cannot be used, or None when it can."""
    try:
        backend()
    except NativeUnavailable as exc:
        return str(exc)
    return None
