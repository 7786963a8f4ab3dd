"""The tcp btl's wire format and its modex address."""

from __future__ import annotations

import ipaddress
import struct

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

AM, GET_REQ, GET_DATA, GET_ERROR, PUT, PUT_ACK, PUT_ERROR = range(1, 8)
KINDS = {AM, GET_REQ, GET_DATA, GET_ERROR, PUT, PUT_ACK, PUT_ERROR}
#: Frame bodies carrying bulk data are split at this size (the length field is 32 bits).
MAX_CHUNK = 1 << 30

_ADDRESS_HEAD = struct.Struct("<4s8sHB")
_ADDRESS_MAGIC = b"TCP1"


@frozen(eq=False, repr=False)
class TcpAddress(FrozenValue):
    nonce: bytes
    port: int
    hosts: tuple[str, ...]


def pack_address(address: TcpAddress) -> bytes:
    head = _ADDRESS_HEAD.pack(_ADDRESS_MAGIC, address.nonce, address.port, len(address.hosts))
    return head + b"".join(ipaddress.IPv4Address(h).packed for h in address.hosts)


def unpack_address(rank: int, blob: bytes) -> TcpAddress:
    where = f"btl tcp: modex address of rank {rank}"
    try:
        magic, nonce, port, count = _ADDRESS_HEAD.unpack_from(blob, 0)
    except struct.error:
        raise ModexError(f"{where} is {len(blob)} bytes, too short") from None
    if magic != _ADDRESS_MAGIC:
        raise ModexError(f"{where} is not a pmca tcp address (starts with {blob[:4]!r})")
    body = blob[_ADDRESS_HEAD.size :]
    if len(body) != 4 * count or count == 0 or port == 0:
        raise ModexError(f"{where} is malformed ({count} hosts, port {port}, {len(body)} bytes)")
    hosts = tuple(str(ipaddress.IPv4Address(body[i : i + 4])) for i in range(0, len(body), 4))
    return TcpAddress(nonce, port, hosts)
