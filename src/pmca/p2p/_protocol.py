"""Message-layer headers, carried in btl active messages (after Open MPI's ob1).

Every message starts with a kind byte. Matching messages (eager, rget,
rndv) carry the sender's per-peer sequence number, so messages from one
source are matched in the order they were sent whatever btl carried them.
LEAVE and LEAVE_ACK carry the next sequence number, so they take effect
only after every matching message sent before them (see :mod:`._leaving`).
"""

from __future__ import annotations

import struct

EAGER, RGET, RNDV, FIN, CTS, FRAG, LEAVE, LEAVE_ACK = range(1, 9)

#: kind, flags, sequence, user tag, total size.
MATCH = struct.Struct("<BBxxIqQ")
#: (after MATCH) send request id, sender's buffer address, number of handles.
RGET_BODY = struct.Struct("<QQB")
#: (after MATCH) send request id.
RNDV_BODY = struct.Struct("<Q")
#: kind, status (0: done), send request id.
FIN_MSG = struct.Struct("<BxxxIQ")
#: kind, send request id, receive request id.
CTS_MSG = struct.Struct("<BxxxQQ")
#: kind, receive request id, offset; the data follows.
FRAG_HEAD = struct.Struct("<BxxxQQ")
#: LEAVE (the sender finalized) and LEAVE_ACK (the sender saw this rank's LEAVE):
#: kind, flags, the sender's next sequence number to this rank (all matching
#: messages before it were sent first, so the receiver knows when it has them).
LEAVE_MSG = struct.Struct("<BBxxI")
#: LEAVE flag: the sender finalized because of an exception.
LEAVE_AFTER_ERROR = 1

STATUS_OK = 0
STATUS_TRUNCATED = 1
STATUS_FAILED = 2


def pack_handles(handles: list[tuple[str, bytes]]) -> bytes:
    parts: list[bytes] = []
    for name, packed in handles:
        encoded = name.encode()
        parts += [bytes([len(encoded)]), encoded, bytes([len(packed)]), packed]
    return b"".join(parts)


def unpack_handles(data: memoryview, count: int) -> dict[str, bytes]:
    handles: dict[str, bytes] = {}
    offset = 0
    for _ in range(count):
        length = data[offset]
        name = bytes(data[offset + 1 : offset + 1 + length]).decode()
        offset += 1 + length
        length = data[offset]
        handles[name] = bytes(data[offset + 1 : offset + 1 + length])
        offset += 1 + length
    return handles
