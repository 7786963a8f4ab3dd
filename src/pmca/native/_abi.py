"""ctypes view of libpmca_hooks.so: structures, status codes, loading.

The library is loaded once per process and never closed: it is linked
``-z nodelete`` because patched libc code may jump into it at any time.
"""

from __future__ import annotations

import ctypes
import enum
import os
import platform
import sys
import threading
from typing import TYPE_CHECKING

from ._errors import NativeUnavailable

if TYPE_CHECKING:
    from pathlib import Path

LIBRARY_NAME = "libpmca_hooks.so"
PROBE_LIBRARY_NAME = "libpmca_probe.so"
#: Where libpmca_hooks.so is installed: next to this package.
LIBRARY_FILE = os.path.join(os.path.dirname(__file__), LIBRARY_NAME)

# Index order is the C enum pmca_symbol.
SYMBOLS: tuple[str, ...] = ("munmap", "madvise", "mremap", "brk", "shmdt", "mmap")


class Status(enum.IntEnum):
    """C enum pmca_status."""

    OK = 0
    ALREADY_INSTALLED = 1
    REFUSED_FOREIGN = 2
    REFUSED_PROLOGUE = 3
    NO_PADDING = 4
    SYMBOL_NOT_FOUND = 5
    PROTECT_FAILED = 6
    NOT_OURS = 7
    NOT_INSTALLED = 8
    UNSUPPORTED = 9
    NO_TRAMPOLINE = 10
    BAD_ARGUMENT = 11


class State(enum.IntEnum):
    """C enum pmca_state."""

    IDLE = 0
    INSTALLED = 1
    ORPHANED = 2


class EventStruct(ctypes.Structure):
    """struct pmca_event."""

    _fields_ = (
        ("address", ctypes.c_uint64),
        ("length", ctypes.c_uint64),
        ("kind", ctypes.c_uint32),
        ("from_alloc", ctypes.c_uint32),
    )


class DrainResult(ctypes.Structure):
    """struct pmca_drain_result."""

    _fields_ = (
        ("first_position", ctypes.c_uint64),
        ("next_position", ctypes.c_uint64),
        ("dropped_total", ctypes.c_uint64),
        ("count", ctypes.c_uint32),
        ("abandoned", ctypes.c_uint32),
    )


class RingStats(ctypes.Structure):
    """struct pmca_ring_stats."""

    _fields_ = (
        ("capacity", ctypes.c_uint64),
        ("published", ctypes.c_uint64),
        ("consumed", ctypes.c_uint64),
        ("dropped", ctypes.c_uint64),
        ("abandoned", ctypes.c_uint64),
        ("incomplete_drains", ctypes.c_uint64),
        ("producer_wakeups", ctypes.c_uint64),
        ("late_publishes", ctypes.c_uint64),
    )


class SiteReport(ctypes.Structure):
    """struct pmca_site_report."""

    _fields_ = (
        ("function", ctypes.c_uint64),
        ("patch_address", ctypes.c_uint64),
        ("padding_address", ctypes.c_uint64),
        ("trampoline", ctypes.c_uint64),
        ("hook", ctypes.c_uint64),
        ("status", ctypes.c_uint32),
        ("state", ctypes.c_uint32),
        ("sys_errno", ctypes.c_int32),
        ("replaced_length", ctypes.c_uint32),
        ("padding_length", ctypes.c_uint32),
        ("reserved", ctypes.c_uint32),
        ("original", ctypes.c_uint8 * 8),
        ("patched", ctypes.c_uint8 * 8),
        ("padding_original", ctypes.c_uint8 * 8),
        ("padding_patched", ctypes.c_uint8 * 8),
        ("found", ctypes.c_uint8 * 16),
        ("reason", ctypes.c_char * 200),
    )


def library_path() -> Path:
    """:data:`LIBRARY_FILE` as a :class:`pathlib.Path`."""
    from pathlib import Path

    return Path(LIBRARY_FILE)


def probe_library_path() -> Path:
    """The small helper library coverage() loads after installing hooks."""
    from pathlib import Path

    return Path(__file__).with_name(PROBE_LIBRARY_NAME)


def platform_reason() -> str | None:
    """Why this platform cannot have native hooks, or None if it may."""
    if not sys.platform.startswith("linux"):
        return f"native memory hooks need Linux; this is {sys.platform}"
    machine = platform.machine()
    if machine == "aarch64":
        return "live prologue patching is implemented for x86_64 only (this is aarch64)"
    if machine not in ("x86_64", "AMD64"):
        return f"native memory hooks need x86_64; this is {machine or 'an unknown CPU'}"
    libc_version = (
        os.confstr("CS_GNU_LIBC_VERSION") if "CS_GNU_LIBC_VERSION" in (os.confstr_names) else None
    )
    if not libc_version:
        return "native memory hooks patch glibc; this C library is not glibc (musl?)"
    return None


def _declare(lib: ctypes.CDLL) -> None:
    report_p = ctypes.POINTER(SiteReport)
    prototypes: dict[str, tuple[type | None, list[type]]] = {
        "pmca_hooks_init": (ctypes.c_int, []),
        "pmca_hooks_init_error": (ctypes.c_char_p, []),
        "pmca_hooks_symbol_count": (ctypes.c_int, []),
        "pmca_hooks_symbol_name": (ctypes.c_char_p, [ctypes.c_int]),
        "pmca_hooks_symbol_address": (ctypes.c_uint64, [ctypes.c_int]),
        "pmca_hooks_patch": (ctypes.c_int, [ctypes.c_int, report_p]),
        "pmca_hooks_restore": (ctypes.c_int, [ctypes.c_int, report_p]),
        "pmca_hooks_inspect": (ctypes.c_int, [ctypes.c_int, report_p]),
        "pmca_hooks_verify": (ctypes.c_int, [ctypes.c_int]),
        "pmca_hooks_configure_ring": (ctypes.c_int64, [ctypes.c_uint64]),
        "pmca_hooks_default_ring_capacity": (ctypes.c_uint32, []),
        "pmca_hooks_drain": (
            ctypes.c_int,
            [
                ctypes.c_void_p,
                ctypes.c_uint32,
                ctypes.c_uint64,
                ctypes.c_uint64,
                ctypes.POINTER(DrainResult),
            ],
        ),
        "pmca_hooks_snapshot": (ctypes.c_uint64, [ctypes.POINTER(ctypes.c_uint64)]),
        "pmca_hooks_head_address": (ctypes.c_void_p, []),
        "pmca_hooks_dropped_address": (ctypes.c_void_p, []),
        "pmca_hooks_wait": (ctypes.c_int, [ctypes.c_uint64, ctypes.c_uint64]),
        "pmca_hooks_wake_listeners": (None, []),
        "pmca_hooks_ring_stats": (None, [ctypes.POINTER(RingStats)]),
        "pmca_hooks_ring_stats_size": (ctypes.c_uint32, []),
        "pmca_hooks_drain_result_size": (ctypes.c_uint32, []),
        "pmca_hooks_publish_synthetic": (
            ctypes.c_uint64,
            [ctypes.c_uint32, ctypes.c_uint64, ctypes.c_uint64, ctypes.c_uint64, ctypes.c_uint64],
        ),
        "pmca_hooks_publish_stalled": (
            ctypes.c_int,
            [ctypes.c_uint64, ctypes.c_uint64, ctypes.POINTER(ctypes.c_int)],
        ),
        "pmca_hooks_calls": (ctypes.c_uint64, [ctypes.c_int]),
        "pmca_hooks_set_enabled": (None, [ctypes.c_int]),
        "pmca_hooks_enabled": (ctypes.c_int, []),
        "pmca_hooks_membarrier_mode": (ctypes.c_char_p, []),
        "pmca_hooks_event_size": (ctypes.c_uint32, []),
        "pmca_hooks_report_size": (ctypes.c_uint32, []),
        "pmca_hooks_check_overwrites": (ctypes.c_uint32, []),
        "pmca_hooks_overwrite_pending": (ctypes.POINTER(ctypes.c_int), []),
        "pmca_hooks_overwrite_handled": (None, [ctypes.c_int]),
        "pmca_ucm_attach": (ctypes.c_int, []),
        "pmca_ucm_error": (ctypes.c_char_p, []),
        "pmca_ucm_path": (ctypes.c_char_p, []),
        "pmca_ucm_subscribe": (ctypes.c_int, [ctypes.c_int]),
        "pmca_ucm_unsubscribe": (None, []),
        "pmca_ucm_subscribed": (ctypes.c_int, []),
        "pmca_ucm_events": (ctypes.c_uint64, []),
        "pmca_ucm_test_brk": (ctypes.c_int, []),
    }
    for name, (restype, argtypes) in prototypes.items():
        function = getattr(lib, name)
        function.restype = restype
        function.argtypes = argtypes


_lock = threading.Lock()
_library: ctypes.CDLL | None = None
_failure: str | None = None


def _open() -> ctypes.CDLL:
    reason = platform_reason()
    if reason is not None:
        raise NativeUnavailable(reason)
    path = LIBRARY_FILE
    if not os.path.exists(path):
        raise NativeUnavailable(
            f"{LIBRARY_NAME} was not built (expected at {path}); build pmca with its C sources"
        )
    try:
        lib = ctypes.CDLL(path)
    except OSError as exc:
        raise NativeUnavailable(f"cannot load {path}: {exc}") from exc
    try:
        _declare(lib)
    except AttributeError as exc:
        raise NativeUnavailable(f"{path} is from another pmca version: {exc}") from exc
    if (
        lib.pmca_hooks_event_size() != ctypes.sizeof(EventStruct)
        or lib.pmca_hooks_report_size() != ctypes.sizeof(SiteReport)
        or lib.pmca_hooks_drain_result_size() != ctypes.sizeof(DrainResult)
        or lib.pmca_hooks_ring_stats_size() != ctypes.sizeof(RingStats)
    ):
        raise NativeUnavailable(f"{path} does not match this pmca version; rebuild it")
    status = lib.pmca_hooks_init()
    if status != Status.OK:
        detail = lib.pmca_hooks_init_error() or b"unknown error"
        raise NativeUnavailable(f"native hook backend: {detail.decode(errors='replace')}")
    return lib


def _reset_after_fork() -> None:
    global _lock
    _lock = threading.Lock()


os.register_at_fork(after_in_child=_reset_after_fork)


def load() -> ctypes.CDLL:
    """The process-wide handle of libpmca_hooks.so (opened once, never closed)."""
    global _library, _failure
    with _lock:
        if _library is not None:
            return _library
        if _failure is not None:
            raise NativeUnavailable(_failure)
        try:
            _library = _open()
        except NativeUnavailable as exc:
            _failure = str(exc)
            raise
        return _library
