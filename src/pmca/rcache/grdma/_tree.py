"""Typed view of libpmca_rcache_itree.so, the grdma registration index.

The library is opened by pmca's component loader (so that a dso-mode
grdma really unloads it); this wrapper only ever receives the handle.
"""

from __future__ import annotations

import ctypes
import errno
import os
from collections.abc import Callable
from typing import TYPE_CHECKING

from ..._public import public

if TYPE_CHECKING:
    from pathlib import Path

LIBRARY_NAME = "libpmca_rcache_itree.so"
#: Where the index library is installed: next to this module.
LIBRARY_FILE = os.path.join(os.path.dirname(__file__), LIBRARY_NAME)

_u64 = ctypes.c_uint64
_ptr = ctypes.c_void_p
_BATCH = 64


class _FullPath:
    """What :attr:`IntervalTree.lookup` answers when the caller must take its full path."""

    def __repr__(self) -> str:
        return "<take the full path>"


FULL_PATH = _FullPath()

#: ``lookup(handle, address, size)``: the cache's one native call per lookup.
Lookup = Callable[[int, int, int], object]


def library_path() -> Path:
    """:data:`LIBRARY_FILE` as a :class:`pathlib.Path`."""
    from pathlib import Path

    return Path(LIBRARY_FILE)


def bind(cdll: ctypes.CDLL) -> None:
    """Declare the index's C signatures on ``cdll`` (idempotent)."""
    cdll.pmca_itree_create.argtypes = [_u64]
    cdll.pmca_itree_create.restype = _ptr
    for name in ("pmca_itree_close", "pmca_itree_destroy"):
        getattr(cdll, name).argtypes = [_ptr]
        getattr(cdll, name).restype = None
    cdll.pmca_itree_insert.argtypes = [_ptr, _u64, _u64, _u64]
    cdll.pmca_itree_insert.restype = ctypes.c_int
    cdll.pmca_itree_remove.argtypes = [_ptr, _u64, _u64]
    cdll.pmca_itree_remove.restype = ctypes.c_int
    cdll.pmca_itree_overlapping.argtypes = [_ptr, _u64, _u64, _ptr, ctypes.c_size_t]
    cdll.pmca_itree_overlapping.restype = ctypes.c_size_t
    cdll.pmca_itree_size.argtypes = [_ptr]
    cdll.pmca_itree_size.restype = ctypes.c_size_t
    cdll.pmca_itree_clear.argtypes = [_ptr]
    cdll.pmca_itree_clear.restype = ctypes.c_int
    cdll.pmca_itree_watch.argtypes = [_ptr, _ptr, _ptr, _ptr, _ptr]
    cdll.pmca_itree_watch.restype = None
    cdll.pmca_itree_synced.argtypes = [_ptr, _u64, _u64]
    cdll.pmca_itree_synced.restype = None
    cdll.pmca_itree_answers.argtypes = [_ptr, _ptr, _ptr, _ptr]
    cdll.pmca_itree_answers.restype = None
    cdll.pmca_itree_take_overwrites.argtypes = [_ptr]
    cdll.pmca_itree_take_overwrites.restype = ctypes.c_uint32
    cdll.pmca_itree_lookup_counts.argtypes = [_ptr, _ptr]
    cdll.pmca_itree_lookup_counts.restype = None


def _bind_hot(cdll: ctypes.CDLL) -> ctypes.PyDLL:
    """The lookups, called without releasing the GIL (a third of a ctypes call's cost).

    Safe because they never block on anything but the index's mutex, whose
    holders are native calls that neither wait for the GIL nor allocate.
    Pointer-typed bounds (uintptr_t in C): ctypes converts an int to
    ``c_void_p`` about three times faster than to ``c_uint64``.
    """
    hot = ctypes.PyDLL(cdll._name, handle=cdll._handle)
    for name in ("pmca_itree_find_covering", "pmca_itree_lookup"):
        getattr(hot, name).argtypes = [_ptr, _ptr, _ptr]
    hot.pmca_itree_find_covering.restype = ctypes.c_int64
    # The keys of an object index are the objects' addresses: ctypes turns
    # the answer back into the object with no lookup.  It takes the answer as
    # a new reference: the index calls Py_IncRef on it (see IntervalTree).
    hot.pmca_itree_lookup.restype = ctypes.py_object
    return hot


def _incref_address() -> int:
    """``Py_IncRef`` (stable ABI) of the running interpreter, handed to the index
    as a plain function pointer: the library itself never links to Python."""
    address = ctypes.cast(ctypes.pythonapi.Py_IncRef, _ptr).value
    assert address is not None
    return address


@public
class IntervalTree:
    """Half-open intervals ``[base, bound)`` with integer keys below 2**63, in native memory.

    Thread-safe: every call takes the index's own pthread mutex, under which
    nothing is allocated or freed.  ``(base, key)`` identifies an interval.
    After :meth:`close` every call fails cleanly (the native handle stays
    valid until :meth:`destroy`, for threads racing with the close).
    """

    def __init__(self, cdll: ctypes.CDLL) -> None:
        bind(cdll)
        self._lib = cdll
        hot = _bind_hot(cdll)
        handle = cdll.pmca_itree_create(0)
        if not handle:
            raise MemoryError("pmca_itree_create: out of memory")
        #: The native handle, for :attr:`lookup`.
        self.handle: int = handle
        self._open = True
        #: :meth:`lookup_counts` as the handle was destroyed.
        self._final_counts = (0, 0)
        self._find: Callable[[int, int, int], int] = hot.pmca_itree_find_covering
        cdll.pmca_itree_answers(handle, id(None), id(FULL_PATH), _incref_address())
        #: ``lookup(handle, address, size)``, for an *object index* only (every
        #: key is ``id(obj)`` of an object kept alive while it is indexed, and
        #: removed from the index before it may die): the object whose interval
        #: covers the pages of the range, None, or :data:`FULL_PATH` (releases
        #: to apply first, a bad range, closed, an overwrite found: see
        #: :meth:`take_overwrites`).  It runs holding the GIL, so an object
        #: found cannot be freed before ctypes holds its new reference.
        self.lookup: Lookup = hot.pmca_itree_lookup

    def _handle(self) -> int:
        if not self._open:
            raise ValueError("interval tree is closed")
        return self.handle

    def insert(self, base: int, bound: int, key: int) -> None:
        rc = self._lib.pmca_itree_insert(self._handle(), base, bound, key)
        if rc == -errno.ENOMEM:
            raise MemoryError(f"interval tree insert [{base:#x}, {bound:#x}): out of memory")
        if rc == -errno.EEXIST:
            raise KeyError(f"interval tree already holds key {key} at {base:#x}")
        if rc == -errno.EBADF:
            raise ValueError("interval tree is closed")

    def remove(self, base: int, key: int) -> bool:
        """Remove the interval; False if it was not there."""
        return bool(self._lib.pmca_itree_remove(self._handle(), base, key) == 0)

    def find_covering(self, low: int, high: int) -> int | None:
        """The key of an interval containing ``[low, high)``, if any."""
        key = self._find(self._handle(), low, high)
        return None if key < 0 else key

    def overlapping(self, low: int, high: int) -> list[int]:
        """Keys of every interval overlapping ``[low, high)``, in base order."""
        tree = self._handle()
        size = _BATCH
        while True:
            keys = (_u64 * size)()
            count = int(self._lib.pmca_itree_overlapping(tree, low, high, keys, size))
            if count == ctypes.c_size_t(-1).value:
                raise ValueError("interval tree is closed")
            if count <= size:
                return list(keys[:count])
            size = count

    def watch(self, head: int, dropped: int, pending: int, check: int) -> None:
        """Make :attr:`lookup` answer :data:`SLOW` whenever the words at ``head`` or
        ``dropped`` differ from their values at the last :meth:`synced`, or the
        word at ``pending`` is nonzero; run the ``uint32_t (*)(void)`` at
        ``check`` first (addresses; 0: none)."""
        self._lib.pmca_itree_watch(
            self._handle(), head or None, dropped or None, pending or None, check or None
        )

    def take_overwrites(self) -> int:
        """What the overwrite check found during lookups since the last call (0: nothing)."""
        return int(self._lib.pmca_itree_take_overwrites(self.handle)) if self._open else 0

    def lookup_counts(self) -> tuple[int, int]:
        """Lookups :attr:`lookup` answered itself, and those it sent to the full path.

        Counted where the native lookup already branches, under the lock it
        already holds: the fast path adds nothing to its work.
        """
        if not self.handle:
            return self._final_counts
        counts = (_u64 * 2)()
        self._lib.pmca_itree_lookup_counts(self.handle, counts)
        return int(counts[0]), int(counts[1])

    def synced(self, head: int, dropped: int) -> None:
        """Every release up to these counter values has been applied."""
        self._lib.pmca_itree_synced(self._handle(), head, dropped)

    def __len__(self) -> int:
        return int(self._lib.pmca_itree_size(self._handle()))

    def clear(self) -> None:
        if self._lib.pmca_itree_clear(self._handle()) == -errno.ENOMEM:
            raise MemoryError("interval tree clear: out of memory")

    def close(self) -> None:
        """Free every interval; the handle answers "closed" until :meth:`destroy`."""
        if self._open:
            self._open = False
            self._lib.pmca_itree_close(self.handle)

    def destroy(self) -> None:
        """Free the handle too: no thread may be using this index any more."""
        self.close()
        if self.handle:
            self._final_counts = self.lookup_counts()
        handle, self.handle = self.handle, 0
        if handle:
            self._lib.pmca_itree_destroy(handle)
