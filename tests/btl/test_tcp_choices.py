"""btl/tcp says which interfaces and pairs it chose and why, and checks who connects."""

from __future__ import annotations

import socket
from typing import Any

import pytest

import pmca
from pmca.btl import Proc
from pmca.btl.base import host_id
from pmca.btl.tcp import _wire as wire


def _peer(session: pmca.Session) -> tuple[Any, list[Proc], bytes]:
    """This process's tcp module, and procs for it and a rank 1 on this host."""
    (tcp,) = (m for m in session.modules("btl") if m.name == "tcp")
    here = host_id()
    mine = Proc(0, here, 1, tcp.address(), local=True)
    other = wire.pack_address(wire.TcpAddress(b"\0" * 8, (wire.Listening("127.0.0.1", 8, 9),)))
    return tcp, [mine, Proc(1, here, 2, other)], tcp.group.nonce


def _hello_from(source: str, port: int, nonce: bytes) -> socket.socket:
    """Rank 1's side of the handshake, sent from ``source`` (not the address it advertised)."""
    sock = socket.socket()
    sock.bind((source, 0))
    sock.connect(("127.0.0.1", port))
    sock.sendall(wire.HELLO.pack(wire.HELLO_MAGIC, 1, nonce))
    return sock


MCA = {
    "btl": "self,tcp",
    "btl_tcp_if_include": "127.0.0.1/8",
    "pmca_base_modex_timeout": 60,
}


def test_verbosity_1_logs_the_interfaces_and_each_peers_rails(capfd) -> None:
    with pmca.Session(mca={**MCA, "btl_base_verbose": 1}, frameworks=["btl"]) as s:
        tcp, procs, nonce = _peer(s)
        client = _hello_from("127.0.0.1", tcp.port, nonce)
        endpoints = tcp.add_procs(procs)
        assert endpoints[1] is not None
        tcp.del_procs([endpoints[1]])
        client.close()
    err = capfd.readouterr().err
    assert "[pmca:btl/tcp] info: interfaces" in err
    assert "lo 127.0.0.1/8: chosen: in btl_tcp_if_include" in err
    assert "rails to peer" in err and "lo 127.0.0.1 -> 127.0.0.1 (same host: loopback)" in err


def test_verbosity_0_keeps_quiet(capfd) -> None:
    with pmca.Session(mca={**MCA, "btl_base_verbose": 0}, frameworks=["btl"]):
        pass
    assert "interfaces" not in capfd.readouterr().err


def test_an_unadvertised_source_is_accepted_only_with_the_modex_nonce(capfd) -> None:
    try:
        socket.create_connection(("127.0.0.1", 9), timeout=1, source_address=("127.0.0.2", 0))
    except ConnectionRefusedError:
        pass
    except OSError as exc:
        pytest.skip(f"127.0.0.2 cannot be a source address here: {exc}")
    with pmca.Session(mca={**MCA, "btl_base_verbose": 40}, frameworks=["btl"]) as s:
        tcp, procs, nonce = _peer(s)
        impostor = _hello_from("127.0.0.2", tcp.port, bytes(b ^ 0xFF for b in nonce))
        genuine = _hello_from("127.0.0.2", tcp.port, nonce)
        # add_procs waits for rank 1: the impostor is refused, the genuine one accepted.
        endpoints = tcp.add_procs(procs)
        assert endpoints[1] is not None
        impostor.settimeout(30)
        assert impostor.recv(1) == b"", "the impostor's connection was not closed"
        tcp.del_procs([endpoints[1]])
        genuine.close()
        impostor.close()
    err = capfd.readouterr().err
    refused = [line for line in err.splitlines() if "refused a connection" in line]
    assert len(refused) == 1 and "source='127.0.0.2'" in refused[0], err
    assert "why='wrong modex nonce: not a rank of this job'" in refused[0], refused
    accepted = [line for line in err.splitlines() if "did not advertise" in line]
    assert len(accepted) == 1
    assert "source='127.0.0.2'" in accepted[0] and "advertised='127.0.0.1'" in accepted[0]
