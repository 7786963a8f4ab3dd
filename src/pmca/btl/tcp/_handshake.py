"""Opening a rail's connections: connect with a hello, accept and check hellos.

The lower rank of a pair connects, from its rail's own address, and sends a
hello naming its rank and the nonce from the peer's modex entry; the higher
rank accepts only hellos that prove a rank of this job expected on this
interface. Accepted and connected sockets get the keepalive settings.
"""

from __future__ import annotations

import select
import socket
import struct
import time
from collections.abc import Iterator
from typing import TYPE_CHECKING

from ..._sockets import recv_exactly
from .._interface import BtlError
from . import _wire as wire
from ._interfaces import Interface
from ._rails import Pairing

if TYPE_CHECKING:
    from structlog.typing import FilteringBoundLogger


def connect(
    interface: Interface, me: int, rank: int, pairing: Pairing, nonce: bytes, deadline: float
) -> socket.socket:
    """A socket from ``interface`` to ``rank``'s end of ``pairing``, hello sent."""
    remote = pairing.remote
    sock = socket.socket(interface.family, socket.SOCK_STREAM)
    try:
        # From this rail's own address, so the peer sees the address it was told.
        sock.bind((interface.address, 0))
        sock.settimeout(max(0.1, deadline - time.monotonic()))
        sock.connect((remote.address, remote.port))
        sock.sendall(wire.HELLO.pack(wire.HELLO_MAGIC, me, nonce))
    except OSError as exc:
        sock.close()
        raise BtlError(
            f"btl tcp: rank {me} cannot connect to rank {rank} from "
            f"{interface.name} {interface.address} to "
            f"{remote.address}:{remote.port} ({pairing.why}): {exc}; check "
            "btl_tcp_if_include/exclude"
        ) from None
    return sock


def accept(
    listener: socket.socket,
    interface: Interface,
    me: int,
    nonce: bytes,
    expected: dict[int, Pairing],
    deadline: float,
    timeout: float,
    log: FilteringBoundLogger,
) -> Iterator[tuple[int, socket.socket]]:
    """Each expected rank and its accepted socket, until ``expected`` is empty.

    Ranks are removed from ``expected`` as they are accepted; a connection
    whose hello does not prove an expected rank of this job is refused.
    """
    listener.settimeout(None)
    while expected:
        remaining = deadline - time.monotonic()
        readable, _, _ = select.select([listener], [], [], max(0.0, remaining))
        if not readable:
            raise BtlError(
                f"btl tcp: rank {me} was never contacted by rank(s) "
                f"{', '.join(map(str, sorted(expected)))} on {interface.name} within "
                f"{timeout:g} s (pmca_base_modex_timeout)"
            )
        sock, peer = listener.accept()
        try:
            sock.settimeout(max(0.1, deadline - time.monotonic()))
            hello = recv_exactly(sock, wire.HELLO.size, "the hello")
            magic, rank, their_nonce = wire.HELLO.unpack(hello)
        except (OSError, struct.error) as exc:
            sock.close()
            log.warning("rejected a connection", peer=peer, why=repr(exc))
            continue
        why = wire.refusal(magic, their_nonce, rank, nonce, expected)
        if why:
            sock.close()
            log.warning(
                "refused a connection: its handshake does not prove a rank of this job "
                "expected on this interface",
                why=why,
                source=peer[0],
                rank=rank,
                interface=interface.name,
            )
            continue
        advertised = expected.pop(rank).remote.address
        if peer[0] != advertised:
            # Routing picked another source address; the nonce of this process's
            # modex entry, which only the job's ranks received, proves who it is.
            log.info(
                "accepted a connection from an address the peer did not advertise",
                rank=rank,
                source=peer[0],
                advertised=advertised,
            )
        yield rank, sock


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


__all__ = ["accept", "connect", "keep_alive"]
