"""Typed view of libpmca_rcache_itree.so, the grdma registration index.

The library is opened by pmca's component loader (so that a dso-mode
grdma really unloads it); this wrapper only ever receives the handle.
"""

from __future__ import annotations

import ctypes
import errno
import os
from collections.abc import Callable
from pathlib import Path

LIBRARY_NAME = "libpmca_rcache_itree.so"

_u64 = ctypes.c_uint64
_BATCH = 64


def library_path() -> Path:
    """Where the index library is installed: next to this module."""
    return Path(__file__).with_name(LIBRARY_NAME)


def bind(cdll: ctypes.CDLL) -> None:
    """Declare the index's C signatures on ``cdll`` (idempotent)."""
    cdll.pmca_itree_create.argtypes = [_u64]
    cdll.pmca_itree_create.restype = ctypes.c_void_p
    cdll.pmca_itree_destroy.argtypes = [ctypes.c_void_p]
    cdll.pmca_itree_destroy.restype = None
    cdll.pmca_itree_insert.argtypes = [ctypes.c_void_p, _u64, _u64, _u64]
    cdll.pmca_itree_insert.restype = ctypes.c_int
    cdll.pmca_itree_remove.argtypes = [ctypes.c_void_p, _u64, _u64]
    cdll.pmca_itree_remove.restype = ctypes.c_int
    # Pointer-typed bounds (uintptr_t in C): ctypes converts an int to c_void_p
    # about three times faster than to c_uint64, and this is the hot call.
    cdll.pmca_itree_find_covering.argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_void_p]
    cdll.pmca_itree_find_covering.restype = ctypes.c_int64
    cdll.pmca_itree_overlapping.argtypes = [
        ctypes.c_void_p,
        _u64,
        _u64,
        ctypes.c_void_p,
        ctypes.c_size_t,
    ]
    cdll.pmca_itree_overlapping.restype = ctypes.c_size_t
    cdll.pmca_itree_size.argtypes = [ctypes.c_void_p]
    cdll.pmca_itree_size.restype = ctypes.c_size_t
    cdll.pmca_itree_clear.argtypes = [ctypes.c_void_p]
    cdll.pmca_itree_clear.restype = None


def _closed_find(tree: int, low: int, high: int) -> int:
    raise ValueError("interval tree is closed")


class IntervalTree:
    """Half-open intervals ``[base, bound)`` with integer keys below 2**63, in native memory.

    Thread-safe: every call takes the tree's own pthread mutex, under which
    nothing is allocated or freed.  ``(base, key)`` identifies an interval.
    """

    def __init__(self, cdll: ctypes.CDLL) -> None:
        bind(cdll)
        self._lib = cdll
        tree = cdll.pmca_itree_create(int.from_bytes(os.urandom(8), "little"))
        if not tree:
            raise MemoryError("pmca_itree_create: out of memory")
        self._tree: int | None = tree
        self._find: Callable[[int, int, int], int] = cdll.pmca_itree_find_covering
        self._overlapping = cdll.pmca_itree_overlapping

    def _handle(self) -> int:
        if self._tree is None:
            raise ValueError("interval tree is closed")
        return self._tree

    def insert(self, base: int, bound: int, key: int) -> None:
        rc = self._lib.pmca_itree_insert(self._handle(), base, bound, key)
        if rc == -errno.ENOMEM:
            raise MemoryError(f"interval tree insert [{base:#x}, {bound:#x}): out of memory")
        if rc == -errno.EEXIST:
            raise KeyError(f"interval tree already holds key {key} at {base:#x}")

    def remove(self, base: int, key: int) -> bool:
        """Remove the interval; False if it was not there."""
        return bool(self._lib.pmca_itree_remove(self._handle(), base, key) == 0)

    def find_covering(self, low: int, high: int) -> int | None:
        """The key of an interval containing ``[low, high)``, if any."""
        key = self._find(self._tree, low, high)  # type: ignore[arg-type]
        return None if key < 0 else key

    def overlapping(self, low: int, high: int) -> list[int]:
        """Keys of every interval overlapping ``[low, high)``, in base order."""
        tree = self._handle()
        size = _BATCH
        while True:
            keys = (_u64 * size)()
            count = int(self._overlapping(tree, low, high, keys, size))
            if count <= size:
                return list(keys[:count])
            size = count

    def __len__(self) -> int:
        return int(self._lib.pmca_itree_size(self._handle()))

    def clear(self) -> None:
        self._lib.pmca_itree_clear(self._handle())

    def close(self) -> None:
        tree, self._tree = self._tree, None
        if tree is not None:
            # find_covering skips _handle() (it is the hot path): make it fail instead.
            self._find = _closed_find
            self._lib.pmca_itree_destroy(tree)
