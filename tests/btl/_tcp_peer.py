"""A tcp module of this process facing pretend ranks on this host (no second process)."""

from __future__ import annotations

import socket
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
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


@contextmanager
def connected_peers(
    mca: dict[str, Any], peers: int
) -> Iterator[tuple[Any, list[Any], list[socket.socket]]]:
    """This process's tcp module, its endpoints for pretend ranks 1 to ``peers``, and
    their sockets (see :func:`pretend_peer`).

    The module reports lost peers to ``tcp.lost`` (ranks) and their errors to
    ``tcp.errors``, not to the session's bml, whose world is this process alone.
    """
    with pmca.Session(mca=mca, frameworks=["btl"]) as s:
        tcp, procs, nonce = pretend_peer(s, peers=peers)
        tcp._error_callbacks.clear()
        tcp.lost = []
        tcp.errors = []

        def lost(endpoint: Any, error: BaseException) -> None:
            tcp.lost.append(endpoint.rank)
            tcp.errors.append(error)

        tcp.register_error(lost)
        sockets = [hello_from("127.0.0.1", tcp.port, nonce, rank) for rank in range(1, peers + 1)]
        endpoints = tcp.add_procs(procs)[1:]
        assert all(endpoint is not None for endpoint in endpoints)
        try:
            yield tcp, endpoints, sockets
        finally:
            tcp.del_procs([e for e in endpoints if e is not None])
            for sock in sockets:
                sock.close()


def progress_until(tcp: Any, condition: Callable[[], object], seconds: float = 30.0) -> None:
    """Progress ``tcp`` until ``condition()`` holds, for ``seconds`` at most."""
    deadline = time.monotonic() + seconds
    while not condition() and time.monotonic() < deadline:
        tcp.progress()
        time.sleep(0.001)
