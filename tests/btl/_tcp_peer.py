"""A tcp module of this process facing pretend ranks on this host (no second process)."""

from __future__ import annotations

import socket
from typing import Any

import pmca
from pmca.btl import Proc
from pmca.btl.base import host_id
from pmca.btl.tcp import _wire as wire


def pretend_peer(session: pmca.Session, peers: int = 1) -> tuple[Any, list[Proc], bytes]:
    """This process's tcp module, procs for it and ranks 1 to ``peers`` on this host,
    and its nonce.

    The module's ``add_procs(procs)`` then waits for each rank's hello on its listener.
    """
    (tcp,) = (m for m in session.modules("btl") if m.name == "tcp")
    here = host_id()
    mine = Proc(0, here, 1, tcp.address(), local=True)
    other = wire.pack_address(wire.TcpAddress(b"\0" * 8, (wire.Listening("127.0.0.1", 8, 9),)))
    others = [Proc(rank, here, rank + 1, other) for rank in range(1, peers + 1)]
    return tcp, [mine, *others], tcp.group.nonce


def hello_from(source: str, port: int, nonce: bytes, rank: int = 1) -> socket.socket:
    """``rank``'s side of the handshake, sent from ``source`` (not the address it advertised)."""
    sock = socket.socket()
    sock.bind((source, 0))
    sock.connect(("127.0.0.1", port))
    sock.sendall(wire.HELLO.pack(wire.HELLO_MAGIC, rank, nonce))
    return sock
