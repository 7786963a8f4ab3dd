"""pmca's memory hooks as libfabric's memory monitor.

libfabric's registration caches learn that memory went away from a memory
monitor. Its own ``memhooks`` monitor patches libc's prologues, which pmca's
hooks already own (two patchers on one prologue refuse or corrupt each
other), so pmca keeps it off (``FI_MR_CACHE_MONITOR``, see
:func:`._fabric.keep_libfabric_off_libc`) and imports itself instead:
``fi_open(..., "mr_cache")`` and ``fi_import_fid`` with a ``fid_mem_monitor``
whose export operations are pmca's, then forwards every release event it
drains to the monitor's ``notify``. Open MPI does the same with its patcher
(``opal/mca/common/ofi``); libfabric accepts one imported monitor per
process.

Release events reach :meth:`MemoryMonitor.released` from pmca's drain, never
from inside a hook, so ``notify`` (which takes libfabric's MR-cache locks)
never runs in an allocator's context.
"""

from __future__ import annotations

import threading
from collections import Counter
from typing import TYPE_CHECKING, Any

from . import _cdef as c
from ._fabric import FabricError, Libfabric

if TYPE_CHECKING:
    from ...memory import ReleaseHandle


class MemoryMonitor:
    """One ``fid_mem_monitor`` backed by pmca's release events."""

    def __init__(self, fi: Libfabric) -> None:
        self._fi = fi
        ffi = fi.ffi
        #: How often libfabric called each export operation, and notifies sent.
        self.calls: Counter[str] = Counter()
        self._lock = threading.Lock()
        self._callbacks = [
            ffi.callback("int(struct fid_mem_monitor *)", self._start),
            ffi.callback("void(struct fid_mem_monitor *)", self._stop),
            ffi.callback(
                "int(struct fid_mem_monitor *, const void *, size_t)", self._subscribe, error=-1
            ),
            ffi.callback("void(struct fid_mem_monitor *, const void *, size_t)", self._unsubscribe),
            ffi.callback(
                "bool(struct fid_mem_monitor *, const void *, size_t)", self._valid, error=False
            ),
        ]
        self._export = ffi.new("struct fi_ops_mem_monitor *")
        self._export.size = ffi.sizeof("struct fi_ops_mem_monitor")
        (
            self._export.start,
            self._export.stop,
            self._export.subscribe,
            self._export.unsubscribe,
            self._export.valid,
        ) = self._callbacks
        self._monitor = ffi.new("struct fid_mem_monitor *")
        self._monitor.fid.fclass = c.FI_CLASS_MEM_MONITOR
        self._monitor.export_ops = self._export
        self._handle: ReleaseHandle | None = None
        self.imported = False

    # -- export operations: libfabric asks; pmca's hooks are already running --

    def _start(self, monitor: Any) -> int:
        self.calls["start"] += 1
        return 0

    def _stop(self, monitor: Any) -> None:
        self.calls["stop"] += 1

    def _subscribe(self, monitor: Any, address: Any, length: int) -> int:
        self.calls["subscribe"] += 1
        return 0  # every range is watched: the hooks see all releases

    def _unsubscribe(self, monitor: Any, address: Any, length: int) -> None:
        self.calls["unsubscribe"] += 1

    def _valid(self, monitor: Any, address: Any, length: int) -> bool:
        self.calls["valid"] += 1
        return True  # invalid ranges were notified (and dropped) already

    # -- import, notify, close ----------------------------------------------

    def import_into_libfabric(self) -> None:
        """``fi_open(..., "mr_cache")`` + ``fi_import_fid``: become libfabric's monitor.

        Raises :class:`FabricError` when libfabric refuses (another monitor,
        Open MPI's for instance, was imported first: ``-FI_EBUSY``).
        """
        fi, ffi = self._fi, self._fi.ffi
        cache = ffi.new("struct fid **")
        fi.check(
            fi.lib.fi_open(fi.api_version, b"mr_cache", ffi.NULL, 0, 0, cache, ffi.NULL),
            'fi_open("mr_cache")',
        )
        try:
            code = cache[0].ops.bind(cache[0], ffi.cast("struct fid *", self._monitor), 0)
            fi.check(code, "fi_import_fid(memory monitor)")
        finally:
            cache[0].ops.close(cache[0])
        self.imported = True

    def follow(self, register_release: Any) -> None:
        """Forward pmca's release events: ``register_release(self.released)``."""
        self._handle = register_release(self.released)

    def released(self, address: int, length: int, kind: str, from_alloc: bool) -> None:
        """A pmca release callback: tell libfabric the range is gone."""
        with self._lock:
            if not self.imported or length == 0:
                return
            notify = self._monitor.import_ops.notify
            notify(self._monitor, self._fi.ffi.cast("void *", address), length)
            self.calls["notify"] += 1

    def notify(self, address: int, length: int) -> None:
        """Send one notification now (what :meth:`released` does per event)."""
        self.released(address, length, "munmap", False)

    def close(self) -> None:
        """Stop forwarding and close the import; libfabric may import another monitor then."""
        handle, self._handle = self._handle, None
        if handle is not None:
            handle.unregister()
        with self._lock:
            if not self.imported:
                return
            self.imported = False
            code = self._monitor.fid.ops.close(self._fi.ffi.cast("struct fid *", self._monitor))
        if code < 0:
            raise FabricError(
                f"fi_close(memory monitor): {self._fi.strerror(code)} ({code})", code=code
            )


__all__ = ["MemoryMonitor"]
