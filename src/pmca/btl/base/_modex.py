"""The modex: each rank's btl addresses, packed into one blob and gathered once.

Blob layout (little endian)::

    b"PMCAMODX" u16 version  u32 pid  u16 len host-id
    u8 count  { u8 len name  u16 len address }*

Anything else (another program's data, another pmca modex version, a
truncated blob) is rejected with :class:`ModexError` naming the rank.
"""

from __future__ import annotations

import os
import struct
from collections.abc import Mapping, Sequence

from attrs import frozen

from ..._public import public
from ..._records import FrozenValue
from .._interface import ModexError

MAGIC = b"PMCAMODX"
VERSION = 1
_HEAD = struct.Struct("<8sHIH")
_NAME = struct.Struct("<B")
_ADDRESS = struct.Struct("<H")


@public
def host_id() -> str:
    """This host's identity: processes with equal ids can share memory.

    The hostname, the kernel's boot id and the network namespace: two
    machines never share a boot id, and two containers or simulated hosts on
    one machine (which share the boot id, and may share a hostname) each have
    their own network namespace.
    """
    try:
        with open("/proc/sys/kernel/random/boot_id") as f:
            boot = f.read().strip()
    except OSError:
        boot = "no-boot-id"
    try:
        network = f"net:{os.stat('/proc/self/ns/net').st_ino}"
    except OSError:
        network = "net:unknown"
    # uname's node name is what socket.gethostname() returns, without importing socket.
    return f"{os.uname().nodename}/{boot}/{network}"


@public
def host_name(host: str) -> str:
    """The hostname part of a :func:`host_id` (for messages)."""
    return host.split("/", 1)[0]


@public
@frozen(eq=False, repr=False)
class RankEntry(FrozenValue):
    """What one rank published."""

    rank: int
    pid: int
    host: str
    addresses: Mapping[str, bytes]


def pack(
    addresses: Mapping[str, bytes], *, pid: int | None = None, host: str | None = None
) -> bytes:
    host_bytes = (host if host is not None else host_id()).encode()
    parts = [
        _HEAD.pack(MAGIC, VERSION, pid if pid is not None else os.getpid(), len(host_bytes)),
        host_bytes,
        _NAME.pack(len(addresses)),
    ]
    for name, address in addresses.items():
        encoded = name.encode()
        if len(encoded) > 255 or len(address) > 0xFFFF:
            raise ModexError(f"btl {name}: modex address of {len(address)} bytes is too long")
        parts += [_NAME.pack(len(encoded)), encoded, _ADDRESS.pack(len(address)), address]
    return b"".join(parts)


def unpack(rank: int, blob: bytes) -> RankEntry:
    """Parse rank ``rank``'s blob, or raise :class:`ModexError` saying what is wrong."""
    where = f"modex entry of rank {rank}"
    view = memoryview(blob)
    try:
        magic, version, pid, host_length = _HEAD.unpack_from(view, 0)
    except struct.error:
        raise ModexError(f"{where}: {len(blob)} bytes is too short to be a pmca modex") from None
    if magic != MAGIC:
        raise ModexError(f"{where}: not a pmca modex (starts with {bytes(view[:8])!r})")
    if version != VERSION:
        raise ModexError(
            f"{where}: modex version {version}, this pmca speaks version {VERSION} "
            "(are all ranks running the same pmca?)"
        )
    offset = _HEAD.size
    try:
        host = bytes(view[offset : offset + host_length]).decode()
        offset += host_length
        (count,) = _NAME.unpack_from(view, offset)
        offset += _NAME.size
        addresses: dict[str, bytes] = {}
        for _ in range(count):
            (name_length,) = _NAME.unpack_from(view, offset)
            offset += _NAME.size
            name = bytes(view[offset : offset + name_length]).decode()
            offset += name_length
            (address_length,) = _ADDRESS.unpack_from(view, offset)
            offset += _ADDRESS.size
            if offset + address_length > len(view):
                raise ModexError(f"{where}: btl {name}'s address is truncated")
            addresses[name] = bytes(view[offset : offset + address_length])
            offset += address_length
    except (struct.error, UnicodeDecodeError) as exc:
        raise ModexError(f"{where}: malformed ({exc})") from None
    if offset != len(view):
        raise ModexError(f"{where}: {len(view) - offset} trailing bytes")
    return RankEntry(rank, pid, host, addresses)


def unpack_all(blobs: Sequence[bytes]) -> list[RankEntry]:
    return [unpack(rank, blob) for rank, blob in enumerate(blobs)]
