"""A tcp module of this process facing a pretend rank 1 on this host (no second process)."""

from __future__ import annotations

import socket
from typing import Any

import pmca
from pmca.btl import Proc
from pmca.btl.base import host_id
from pmca.btl.tcp import _wire as wire


def pretend_peer(session: pmca.Session) -> tuple[Any, list[Proc], bytes]:
    """This process's tcp module, procs for it and a rank 1 on this host, and its nonce.

    The module's ``add_procs(procs)`` then waits for rank 1's hello on its listener.
    """
    (tcp,) = (m for m in session.modules("btl") if m.name == "tcp")
    here = host_id()
    mine = Proc(0, here, 1, tcp.address(), local=True)
    other = wire.pack_address(wire.TcpAddress(b"\0" * 8, (wire.Listening("127.0.0.1", 8, 9),)))
    return tcp, [mine, Proc(1, here, 2, other)], tcp.group.nonce


def hello_from(source: str, port: int, nonce: bytes) -> socket.socket:
    """Rank 1's side of the handshake, sent from ``source`` (not the address it advertised)."""
    sock = socket.socket()
    sock.bind((source, 0))
    sock.connect(("127.0.0.1", port))
    sock.sendall(wire.HELLO.pack(wire.HELLO_MAGIC, 1, nonce))
    return sock
