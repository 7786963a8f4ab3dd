"""The remote key most btls put in :attr:`~pmca.btl.MemoryHandle.packed`.

The btl's own key of the registration, then the registered base and size:
the side that puts or gets checks the transfer against the range before it
touches the peer's memory or hands the transfer to its transport, so a
stale or foreign handle is an error naming the btl, the peer and both
ranges instead of a write somewhere else.
"""

from __future__ import annotations

import ctypes
import struct

from .._interface import BtlError

#: Key, registered base, registered size.
_REMOTE = struct.Struct("<QQQ")


def memory_at(address: int, size: int) -> memoryview:
    """The ``size`` bytes at ``address`` of this process, as a writable byte view
    (a range a transfer was checked against, see :func:`remote_range`)."""
    return memoryview((ctypes.c_char * size).from_address(address)).cast("B")


def pack_remote(key: int, base: int, size: int) -> bytes:
    """The remote key of registration ``key`` of ``[base, base + size)``."""
    return _REMOTE.pack(key, base, size)


def remote_range(
    btl: str, operation: str, rank: int, address: int, size: int, handle: bytes
) -> tuple[int, int]:
    """The key and registered base in ``handle`` (from ``rank``), for ``operation``
    ("put" or "get") of ``[address, address + size)``; a :class:`BtlError` when the
    handle is malformed or the transfer leaves the registered range."""
    try:
        key, base, length = _REMOTE.unpack(handle)
    except struct.error:
        raise BtlError(f"btl {btl}: malformed remote handle from rank {rank}: {handle!r}") from None
    if address < base or address + size > base + length:
        raise BtlError(
            f"btl {btl}: {operation} of [{address:#x}, +{size}) is outside rank {rank}'s "
            f"registration [{base:#x}, +{length})"
        )
    return key, base


__all__ = ["pack_remote", "remote_range"]
