"""The tcp btl's wire format and its modex address."""

from __future__ import annotations

import ipaddress
import struct
from collections.abc import Container

from attrs import frozen

from ..._records import FrozenValue
from .._interface import ModexError

#: Every frame: kind, active-message tag, body length, auxiliary word.
FRAME = struct.Struct("<BBxxIQ")
#: Body of a get request: registration key, address, size (aux: request id).
GET_REQUEST = struct.Struct("<QQQ")
#: Head of a put body: registration key, address, request id; the data follows.
PUT_HEAD = struct.Struct("<QQQ")
#: The handle a peer sends back for put/get: module nonce, key, base, size.
HANDLE = struct.Struct("<8sQQQ")
#: The first bytes on a new connection: magic, connecting rank, listener's nonce.
HELLO = struct.Struct("<4sI8s")
HELLO_MAGIC = b"PMCT"

#: What a lane reads and writes after an active message's frame header: the
#: message layer's match header (``pmca.p2p._protocol.MATCH``: kind, flags,
#: sequence, user tag, payload size), and its kind for an eager message.
MATCH = struct.Struct("<BBxxIqQ")
EAGER = 1
#: A lane's eager message: frame header and match header, packed at once.
LANE_HEAD = struct.Struct("<BBxxIQBBxxIqQ")

AM, GET_REQ, GET_DATA, GET_ERROR, PUT, PUT_ACK, PUT_ERROR = range(1, 8)
KINDS = {AM, GET_REQ, GET_DATA, GET_ERROR, PUT, PUT_ACK, PUT_ERROR}
#: Frame bodies carrying bulk data are split at this size (the length field is 32 bits).
MAX_CHUNK = 1 << 30

_ADDRESS_HEAD = struct.Struct("<4s8sB")
_ADDRESS_MAGIC = b"TCP2"
#: Per interface: IP version, prefix length, listening port; then 4 or 16 address bytes.
_ENTRY = struct.Struct("<BBH")


@frozen(eq=False, repr=False)
class Listening(FrozenValue):
    """One interface a rank listens on: its address, prefix length and port."""

    address: str
    prefix: int
    port: int

    @property
    def ip(self) -> ipaddress.IPv4Address | ipaddress.IPv6Address:
        return ipaddress.ip_address(self.address)


@frozen(eq=False, repr=False)
class TcpAddress(FrozenValue):
    nonce: bytes
    interfaces: tuple[Listening, ...]


def pack_address(address: TcpAddress) -> bytes:
    parts = [_ADDRESS_HEAD.pack(_ADDRESS_MAGIC, address.nonce, len(address.interfaces))]
    for entry in address.interfaces:
        ip = entry.ip
        parts.append(_ENTRY.pack(ip.version, entry.prefix, entry.port) + ip.packed)
    return b"".join(parts)


def unpack_address(rank: int, blob: bytes) -> TcpAddress:
    where = f"btl tcp: modex address of rank {rank}"
    try:
        magic, nonce, count = _ADDRESS_HEAD.unpack_from(blob, 0)
    except struct.error:
        raise ModexError(f"{where} is {len(blob)} bytes, too short") from None
    if magic != _ADDRESS_MAGIC:
        raise ModexError(f"{where} is not a pmca tcp address (starts with {blob[:4]!r})")
    offset = _ADDRESS_HEAD.size
    entries: list[Listening] = []
    try:
        for _ in range(count):
            version, prefix, port = _ENTRY.unpack_from(blob, offset)
            offset += _ENTRY.size
            size = {4: 4, 6: 16}[version]
            raw = blob[offset : offset + size]
            if len(raw) != size or port == 0:
                raise ValueError
            offset += size
            entries.append(Listening(str(ipaddress.ip_address(raw)), prefix, port))
    except (struct.error, KeyError, ValueError):
        raise ModexError(f"{where} is malformed (entry {len(entries)} of {count})") from None
    if offset != len(blob) or count == 0:
        raise ModexError(f"{where} is malformed ({count} interfaces, {len(blob)} bytes)")
    return TcpAddress(nonce, tuple(entries))


def refusal(
    magic: bytes, nonce: bytes, rank: int, own_nonce: bytes, expected: Container[int]
) -> str:
    """Why a handshake does not prove an expected rank of this job ("" when it does)."""
    if magic != HELLO_MAGIC:
        return "not a pmca tcp handshake (wrong magic)"
    if nonce != own_nonce:
        return "wrong modex nonce: not a rank of this job"
    if rank not in expected:
        return f"rank {rank} is not expected on this interface"
    return ""
