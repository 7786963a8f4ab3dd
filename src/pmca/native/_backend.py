"""The process-wide native hook backend: patch, restore, inspect, drain."""

from __future__ import annotations

import ctypes
import os
import threading
from typing import cast

import attrs

from . import _abi
from ._abi import SYMBOLS, SiteReport, State, Status
from ._errors import NativeUnavailable, PatchRefused
from ._events import END_OF_MEMORY, Drained, ReleaseEvent, ReleaseKind


@attrs.frozen(slots=True)
class PatchSite:
    """One live redirection of a libc function to pmca's hook.

    ``original``/``patched`` are the bytes at ``patch_address`` (the function
    entry, or just after its ``endbr64``) before and after patching: the
    jump is exactly those two bytes.  The ``jmp rel32`` written into the
    linker padding at ``padding_address`` stays in place after a restore
    (a thread may still be about to execute it); it is never executed once
    the entry is restored.
    """

    symbol: str
    address: int
    original: bytes
    patched: bytes
    patch_address: int
    padding_address: int
    padding_original: bytes
    padding_patched: bytes
    trampoline: int
    hook: int


def _site_from(symbol: str, report: SiteReport) -> PatchSite:
    replaced = report.replaced_length
    padding = report.padding_length
    return PatchSite(
        symbol=symbol,
        address=report.function,
        original=bytes(report.original[:replaced]),
        patched=bytes(report.patched[:replaced]),
        patch_address=report.patch_address,
        padding_address=report.padding_address,
        padding_original=bytes(report.padding_original[:padding]),
        padding_patched=bytes(report.padding_patched[:padding]),
        trampoline=report.trampoline,
        hook=report.hook,
    )


def _reason(report: SiteReport) -> str:
    reason = bytes(report.reason).split(b"\0", 1)[0].decode(errors="replace")
    if report.sys_errno:
        reason = f"{reason} ({os.strerror(report.sys_errno)})"
    return reason


def _event(address: int, length: int, kind_code: int, from_alloc: int) -> ReleaseEvent:
    kind = cast(ReleaseKind, _abi.KINDS.get(kind_code, "munmap"))
    if kind == "shmdt" and length == 0:
        length = END_OF_MEMORY - address  # size unknown: to the end of memory
    return ReleaseEvent(address, length, kind, bool(from_alloc))


class HookBackend:
    """Drives libpmca_hooks.so.  Get the process-wide instance with :func:`backend`.

    Patching is serialised in C; this object holds no patch state of its own,
    so every answer reflects the live bytes.
    """

    def __init__(self, lib: ctypes.CDLL) -> None:
        self._lib = lib
        self._drain_lock = threading.Lock()
        self._buffer_size = 0
        self._buffer: ctypes.Array[_abi.EventStruct] | None = None

    @property
    def symbols(self) -> tuple[str, ...]:
        """The libc functions this backend can hook."""
        return SYMBOLS

    @property
    def capacity(self) -> int:
        """How many events the native ring holds before dropping."""
        return int(self._lib.pmca_hooks_capacity())

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
            return _site_from(symbol, report)
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
        return _site_from(symbol, report)

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

    def drain(self, max_events: int = 4096) -> Drained:
        """Take up to ``max_events`` events from the ring.

        Events taken here are gone for everyone else: applications should
        drain through :func:`pmca.native.dispatcher` instead.
        """
        if max_events <= 0:
            raise ValueError("max_events must be positive")
        dropped = ctypes.c_uint64(0)
        with self._drain_lock:
            if self._buffer is None or self._buffer_size < max_events:
                self._buffer = (_abi.EventStruct * max_events)()
                self._buffer_size = max_events
            buffer = self._buffer
            count = self._lib.pmca_hooks_drain(buffer, max_events, ctypes.byref(dropped))
            events = tuple(
                _event(item.address, item.length, item.kind, item.from_alloc)
                for item in buffer[:count]
            )
        return Drained(events=events, overflowed=dropped.value > 0, dropped=dropped.value)

    def dropped_total(self) -> int:
        """Events lost since the library was loaded."""
        return int(self._lib.pmca_hooks_dropped_total())

    def pending(self) -> int:
        """Events in the ring (claimed or published) not yet drained."""
        return int(self._lib.pmca_hooks_pending())

    def eventfd(self) -> int:
        """The doorbell: readable after an event was pushed while armed."""
        return int(self._lib.pmca_hooks_eventfd())

    def rearm(self) -> None:
        """Ask for one more doorbell ring; call before draining, not after."""
        self._lib.pmca_hooks_rearm()

    def set_enabled(self, enabled: bool) -> None:
        """False turns every installed hook into a pure system-call pass-through."""
        self._lib.pmca_hooks_set_enabled(1 if enabled else 0)

    @property
    def enabled(self) -> bool:
        """Whether installed hooks record events."""
        return bool(self._lib.pmca_hooks_enabled())


_singleton_lock = threading.Lock()
_singleton: HookBackend | None = None


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
        _singleton._drain_lock = threading.Lock()


os.register_at_fork(after_in_child=_reset_after_fork)


def available() -> bool:
    """Whether the native hook backend can be used in this process."""
    return unavailable_reason() is None


def unavailable_reason() -> str | None:
    """Why the native hook backend cannot be used, or None when it can."""
    try:
        backend()
    except NativeUnavailable as exc:
        return str(exc)
    return None
