"""A peer host that stopped answering while data to it is unacknowledged.

TCP keepalive notices a dead host only on an idle connection: while sent
data waits for its acknowledgement the kernel retransmits instead, for
``tcp_retries2`` rounds (about 15 minutes). ``TCP_USER_TIMEOUT`` would cut
that short but also aborts a connection whose peer is alive and merely not
reading (a zero window), which a computing rank may do for a long time. So
the module looks at the kernel's own figures (``TCP_INFO``): a connection
with unacknowledged data and no acknowledgement at all for longer than the
keepalive bound has a peer whose kernel is gone or unreachable. A live
peer's kernel acknowledges data that fits its window, and answers window
probes, whatever its process does.
"""

from __future__ import annotations

import socket
import struct

#: struct tcp_info up to tcpi_last_ack_recv: 8 one-byte fields, then u32s.
_TCP_INFO = struct.Struct("<8B13I")
_UNACKED = 8 + 4
_LAST_ACK_RECV = 8 + 12


def unacknowledged_silence(sock: socket.socket) -> float | None:
    """Seconds since ``sock`` last received an acknowledgement, if data awaits one."""
    try:
        raw = sock.getsockopt(socket.IPPROTO_TCP, socket.TCP_INFO, _TCP_INFO.size)
    except OSError:
        return None
    fields = _TCP_INFO.unpack_from(raw.ljust(_TCP_INFO.size, b"\0"))
    if not fields[_UNACKED]:
        return None
    return float(fields[_LAST_ACK_RECV]) / 1000.0


__all__ = ["unacknowledged_silence"]
