"""libc's memory functions through ctypes, typed once for all of pmca.

Calls made through these go through libc's (possibly patched) entry points,
exactly like calls from any other library would: the native self-tests, the
loader's address quarantine and the seed scenarios all rely on that.
"""

from __future__ import annotations

import ctypes
import mmap
import os
import platform

from ._forksafe import short_lock

PROT_NONE = 0
PROT_READ = 1
PROT_WRITE = 2
MAP_SHARED = 0x01
MAP_PRIVATE = 0x02
MAP_ANONYMOUS = 0x20
MAP_FIXED = 0x10
MAP_NORESERVE = 0x4000
MAP_FIXED_NOREPLACE = 0x100000
MADV_DONTNEED = 4
MREMAP_MAYMOVE = 1
MREMAP_FIXED = 2
IPC_PRIVATE = 0
IPC_CREAT = 0o1000
IPC_RMID = 0
MAP_FAILED = 2**64 - 1
PAGE = mmap.PAGESIZE

# munmap's system call number, for the "raw syscall" documented miss.
SYS_MUNMAP = {"x86_64": 11, "aarch64": 215}.get(platform.machine(), -1)

_void_p = ctypes.c_void_p
_size_t = ctypes.c_size_t


class Libc:
    """Typed ctypes prototypes for the libc functions the self-tests drive."""

    def __init__(self) -> None:
        lib = ctypes.CDLL("libc.so.6", use_errno=True)
        self._lib = lib
        self._declare(
            "mmap",
            _void_p,
            [_void_p, _size_t, ctypes.c_int, ctypes.c_int, ctypes.c_int, ctypes.c_long],
        )
        self._declare("munmap", ctypes.c_int, [_void_p, _size_t])
        self._declare("madvise", ctypes.c_int, [_void_p, _size_t, ctypes.c_int])
        self._declare("mremap", _void_p, [_void_p, _size_t, _size_t, ctypes.c_int, _void_p])
        self._declare("brk", ctypes.c_int, [_void_p])
        self._declare("sbrk", _void_p, [ctypes.c_ssize_t])
        self._declare("shmget", ctypes.c_int, [ctypes.c_int, _size_t, ctypes.c_int])
        self._declare("shmat", _void_p, [ctypes.c_int, _void_p, ctypes.c_int])
        self._declare("shmdt", ctypes.c_int, [_void_p])
        self._declare("shmctl", ctypes.c_int, [ctypes.c_int, ctypes.c_int, _void_p])
        self._declare("malloc", _void_p, [_size_t])
        self._declare("realloc", _void_p, [_void_p, _size_t])
        self._declare("free", None, [_void_p])
        self._declare("malloc_trim", ctypes.c_int, [_size_t])
        self._declare("syscall", ctypes.c_long, [ctypes.c_long, _void_p, _size_t])

    def _declare(self, name: str, restype: type | None, argtypes: list[type]) -> None:
        function = getattr(self._lib, name)
        function.restype = restype
        function.argtypes = argtypes

    def mmap(
        self, address: int, length: int, prot: int, flags: int, fd: int = -1, offset: int = 0
    ) -> int:
        """mmap(2); raises OSError with errno on failure."""
        result = self._lib.mmap(address or None, length, prot, flags, fd, offset)
        if result is None or result == MAP_FAILED:
            errno = ctypes.get_errno()
            raise OSError(errno, f"mmap failed: {os.strerror(errno)}")
        return int(result)

    def map_anonymous(self, length: int, address: int = 0, fixed: bool = False) -> int:
        flags = MAP_PRIVATE | MAP_ANONYMOUS | (MAP_FIXED if fixed else 0)
        return self.mmap(address, length, PROT_READ | PROT_WRITE, flags)

    def munmap(self, address: int, length: int) -> int:
        return int(self._lib.munmap(address, length))

    def madvise(self, address: int, length: int, advice: int) -> int:
        return int(self._lib.madvise(address, length, advice))

    def mremap(
        self, address: int, old_length: int, new_length: int, flags: int, new_address: int = 0
    ) -> int:
        result = self._lib.mremap(address, old_length, new_length, flags, new_address or None)
        if result is None or result == MAP_FAILED:
            raise OSError(ctypes.get_errno(), "mremap failed")
        return int(result)

    def brk(self, address: int) -> int:
        return int(self._lib.brk(address or None))

    def sbrk(self, increment: int) -> int:
        """Move the program break; only safe while no other thread can malloc."""
        result = self._lib.sbrk(increment)
        if result is None or result == MAP_FAILED:
            raise OSError(ctypes.get_errno(), "sbrk failed")
        return int(result)

    def shm_attach_private(self, length: int) -> int:
        """Attach a fresh private SysV segment, already marked for removal.

        Marked right after the attach, with interrupts held back between
        the two: a segment that is not marked outlives the process.
        """
        from ._interrupts import deferred_interrupts

        with deferred_interrupts():
            segment = int(self._lib.shmget(IPC_PRIVATE, length, IPC_CREAT | 0o600))
            if segment < 0:
                raise OSError(ctypes.get_errno(), "shmget failed")
            address = self._lib.shmat(segment, None, 0)
            self._lib.shmctl(segment, IPC_RMID, None)
        if address is None or address == MAP_FAILED:
            raise OSError(ctypes.get_errno(), "shmat failed")
        return int(address)

    def shmdt(self, address: int) -> int:
        return int(self._lib.shmdt(address))

    def malloc(self, size: int) -> int:
        result = self._lib.malloc(size)
        if not result:
            raise MemoryError(f"malloc({size}) failed")
        return int(result)

    def realloc(self, address: int, size: int) -> int:
        result = self._lib.realloc(address, size)
        if not result:
            raise MemoryError(f"realloc(..., {size}) failed")
        return int(result)

    def free(self, address: int) -> None:
        self._lib.free(address)

    def malloc_trim(self, pad: int = 0) -> int:
        return int(self._lib.malloc_trim(pad))

    def raw_munmap(self, address: int, length: int) -> int:
        """munmap through syscall(2): invisible to prologue hooks."""
        return int(self._lib.syscall(SYS_MUNMAP, address, length))

    @staticmethod
    def touch(address: int, length: int) -> None:
        """Make the pages resident, so releasing them is real work."""
        ctypes.memset(address, 0x5A, length)


_lock = short_lock()
_libc: Libc | None = None


def libc() -> Libc:
    global _libc
    with _lock:
        if _libc is None:
            _libc = Libc()
        return _libc
