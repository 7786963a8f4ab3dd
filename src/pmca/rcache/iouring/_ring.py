"""ctypes view of libpmca_uring.so: one io_uring with a sparse registered-buffer table."""

from __future__ import annotations

import ctypes
import os
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from functools import cache
from pathlib import Path

from ..._public import public

LIBRARY_NAME = "libpmca_uring.so"

_c_void_p = ctypes.c_void_p
_size_t = ctypes.c_size_t
_u64 = ctypes.c_uint64
_uint = ctypes.c_uint


def library_path() -> Path:
    return Path(__file__).with_name(LIBRARY_NAME)


@cache
def _library() -> ctypes.CDLL:
    lib = ctypes.CDLL(str(library_path()))
    lib.pmca_uring_open.argtypes = [_uint, _uint, ctypes.POINTER(ctypes.c_int)]
    lib.pmca_uring_open.restype = _c_void_p
    lib.pmca_uring_close.argtypes = [_c_void_p]
    lib.pmca_uring_close.restype = None
    lib.pmca_uring_register.argtypes = [_c_void_p, _uint, _c_void_p, _size_t]
    lib.pmca_uring_register.restype = ctypes.c_int
    lib.pmca_uring_unregister.argtypes = [_c_void_p, _uint]
    lib.pmca_uring_unregister.restype = ctypes.c_int
    for name in ("pmca_uring_write_fixed", "pmca_uring_read_fixed"):
        function = getattr(lib, name)
        function.argtypes = [_c_void_p, ctypes.c_int, _c_void_p, _size_t, _u64, _uint]
        function.restype = ctypes.c_long
    lib.pmca_uring_send_zc_fixed.argtypes = [
        _c_void_p,
        ctypes.c_int,
        _c_void_p,
        _size_t,
        _uint,
        ctypes.c_int,
    ]
    lib.pmca_uring_send_zc_fixed.restype = ctypes.c_long
    return lib


#: io_uring's submission entry holds a length in 32 bits (``sqe->len``).
MAX_LENGTH = (1 << 32) - 1


def _check(result: int, what: str) -> int:
    if result < 0:
        raise OSError(-result, f"io_uring {what}: {os.strerror(-result)}")
    return result


def _check_length(length: int, what: str) -> None:
    if not 0 <= length <= MAX_LENGTH:
        raise ValueError(
            f"io_uring {what}: length={length} does not fit io_uring's 32-bit length "
            f"(0 to {MAX_LENGTH} bytes); split the transfer"
        )


@public
class Ring:
    """An io_uring whose registered-buffer table has ``table_size`` empty slots.

    Operations release the GIL while they wait in the kernel; ``close``
    refuses new ones and waits for those in flight before it frees the ring.
    """

    def __init__(self, *, table_size: int = 1024, entries: int = 8) -> None:
        self._lib = _library()
        error = ctypes.c_int(0)
        ring = self._lib.pmca_uring_open(entries, table_size, ctypes.byref(error))
        if not ring:
            raise OSError(error.value, f"io_uring setup: {os.strerror(error.value)}")
        self._ring: int | None = ring
        self.table_size = table_size
        self._idle = threading.Condition(threading.Lock())
        self._users = 0

    @contextmanager
    def _using(self) -> Iterator[int]:
        """The ring's handle, counted in use until the operation returns."""
        with self._idle:
            ring = self._ring
            if ring is None:
                raise ValueError("io_uring ring is closed")
            self._users += 1
        try:
            yield ring
        finally:
            with self._idle:
                self._users -= 1
                if self._users == 0:
                    self._idle.notify_all()

    def register(self, index: int, address: int, length: int) -> None:
        with self._using() as ring:
            _check(self._lib.pmca_uring_register(ring, index, address, length), "register")

    def unregister(self, index: int) -> None:
        with self._using() as ring:
            _check(self._lib.pmca_uring_unregister(ring, index), "unregister")

    def write_fixed(self, fd: int, address: int, length: int, index: int, offset: int = 0) -> int:
        """``write(fd, address, length)`` through slot ``index``'s pinned pages."""
        _check_length(length, "write_fixed")
        with self._using() as ring:
            result = self._lib.pmca_uring_write_fixed(ring, fd, address, length, offset, index)
        return _check(result, "write_fixed")

    def read_fixed(self, fd: int, address: int, length: int, index: int, offset: int = 0) -> int:
        """``read(fd, address, length)`` into slot ``index``'s pinned pages."""
        _check_length(length, "read_fixed")
        with self._using() as ring:
            result = self._lib.pmca_uring_read_fixed(ring, fd, address, length, offset, index)
        return _check(result, "read_fixed")

    def send_zc(self, fd: int, address: int, length: int, index: int, flags: int = 0) -> int:
        """Zero-copy ``send`` from slot ``index``; returns when the pages are released."""
        _check_length(length, "send_zc")
        with self._using() as ring:
            result = self._lib.pmca_uring_send_zc_fixed(ring, fd, address, length, index, flags)
        return _check(result, "send_zc")

    def close(self) -> None:
        """Refuse new operations, wait for the ones in flight, then free the ring."""
        with self._idle:
            ring, self._ring = self._ring, None
            self._idle.wait_for(lambda: self._users == 0)
        if ring is not None:
            self._lib.pmca_uring_close(ring)
