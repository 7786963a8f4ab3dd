"""Socket helpers shared by pmca's own protocols (the pair world, scenario channels)."""

from __future__ import annotations

import socket


def recv_exactly(sock: socket.socket, size: int, what: str) -> bytes:
    """Exactly ``size`` bytes from ``sock``, however the stream splits them.

    A peer that closes first raises :class:`ConnectionResetError` saying
    ``what`` was being read and how much of it had come. The socket's own
    timeout applies to each read.
    """
    data = bytearray()
    while len(data) < size:
        chunk = sock.recv(size - len(data))
        if not chunk:
            raise ConnectionResetError(
                f"the peer closed the connection during {what} ({len(data)} of {size} bytes read)"
            )
        data += chunk
    return bytes(data)


__all__ = ["recv_exactly"]
