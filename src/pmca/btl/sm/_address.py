"""What a process publishes in the modex for its sm segment, and reading a peer's."""

from __future__ import annotations

import os
import struct

from .._interface import ModexError, Proc
from ._transport import SegmentAddress

_MAGIC = b"PMSM"
_VERSION = 1
# magic, version, reserved, pid, memfd, wake fd, segment size, segment base, pid namespace
_ADDRESS = struct.Struct("<4sHHiiiQQQ")


def pack_address(address: SegmentAddress, namespace: int) -> bytes:
    """What a process publishes in the modex for its sm segment."""
    a = address
    return _ADDRESS.pack(_MAGIC, _VERSION, 0, a.pid, a.fd, a.wake_fd, a.size, a.base, namespace)


def parse_address(proc: Proc) -> tuple[SegmentAddress, int]:
    """``proc``'s segment address and pid namespace; :class:`ModexError` naming what is wrong."""
    raw = proc.address or b""
    try:
        magic, version, _, pid, fd, wake_fd, size, base, namespace = _ADDRESS.unpack(raw)
    except struct.error:
        raise ModexError(
            f"btl sm: rank {proc.rank} published a {len(raw)}-byte address, "
            f"not the {_ADDRESS.size}-byte sm address ({raw[:16]!r})"
        ) from None
    if magic != _MAGIC or version != _VERSION:
        raise ModexError(
            f"btl sm: rank {proc.rank} published {magic!r} version {version}, "
            f"not {_MAGIC!r} version {_VERSION} (another pmca version?)"
        )
    if pid != proc.pid:
        raise ModexError(
            f"btl sm: rank {proc.rank}'s address names pid {pid}, but the rank is pid {proc.pid}"
        )
    return SegmentAddress(pid, fd, wake_fd, size, base), namespace


def pid_namespace() -> int:
    """The inode of this process's pid namespace (pids mean the same only inside one)."""
    try:
        return os.stat("/proc/self/ns/pid").st_ino
    except OSError:
        return 0


__all__ = ["pack_address", "parse_address", "pid_namespace"]
