"""btl/tcp says which interfaces and pairs it chose and why, and checks who connects."""

from __future__ import annotations

import socket

import pytest

import pmca

from ._tcp_peer import hello_from, pretend_peer

MCA = {
    "btl": "self,tcp",
    "btl_tcp_if_include": "127.0.0.1/8",
    "pmca_base_modex_timeout": 60,
}


def test_verbosity_1_logs_the_interfaces_and_each_peers_rails(capfd) -> None:
    with pmca.Session(mca={**MCA, "btl_base_verbose": 1}, frameworks=["btl"]) as s:
        tcp, procs, nonce = pretend_peer(s)
        client = hello_from("127.0.0.1", tcp.port, nonce)
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
        tcp, procs, nonce = pretend_peer(s)
        impostor = hello_from("127.0.0.2", tcp.port, bytes(b ^ 0xFF for b in nonce))
        genuine = hello_from("127.0.0.2", tcp.port, nonce)
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
