"""Opening a rail's connections: connect and send a hello; keepalive settings.

The higher rank of a pair connects, from its rail's own address, and sends a
hello naming its rank and the nonce from the peer's modex entry; the lower
rank accepts only hellos that prove a rank of this job expected on this
interface (``_listener``). Accepted and connected sockets get the keepalive
settings.
"""

from __future__ import annotations

import socket
import time

from . import _wire as wire
from ._exhaustion import socket_error
from ._interfaces import Interface
from ._rails import Pairing


def connect(
    interface: Interface, me: int, rank: int, pairing: Pairing, nonce: bytes, deadline: float
) -> socket.socket:
    """A socket from ``interface`` to ``rank``'s end of ``pairing``, hello sent."""
    remote = pairing.remote
    doing = (
        f"btl tcp: rank {me} cannot connect to rank {rank} from {interface.name} "
        f"{interface.address} to {remote.address}:{remote.port} ({pairing.why})"
    )
    try:
        sock = socket.socket(interface.family, socket.SOCK_STREAM)
    except OSError as exc:
        raise socket_error(exc, doing) from None
    try:
        # From this rail's own address, so the peer sees the address it was told.
        sock.bind((interface.address, 0))
        sock.settimeout(max(0.1, deadline - time.monotonic()))
        sock.connect((remote.address, remote.port))
        sock.sendall(wire.HELLO.pack(wire.HELLO_MAGIC, me, nonce))
    except OSError as exc:
        sock.close()
        raise socket_error(exc, doing, "; check btl_tcp_if_include/exclude") from None
    return sock


def keep_alive(sock: socket.socket, keepalive: tuple[int, ...] | None) -> None:
    """Turn on TCP keepalive with (idle, interval, probes), unless ``keepalive`` is None."""
    if keepalive is None:
        return
    # No TCP_USER_TIMEOUT: it also aborts a connection whose peer, alive, just
    # does not read for that long (a zero window), which a computing rank may do.
    idle, interval, probes = keepalive
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_KEEPALIVE, 1)
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_KEEPIDLE, idle)
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_KEEPINTVL, interval)
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_KEEPCNT, probes)


__all__ = ["connect", "keep_alive"]
