"""``pmca info --tcp-interfaces``: the interfaces btl/tcp would use, and why."""

from __future__ import annotations

from tests.cli.conftest import Result


def test_pmca_info_says_which_interfaces_tcp_would_use_and_why(run_pmca) -> None:
    result: Result = run_pmca(
        "info",
        "--tcp-interfaces",
        "--parsable",
        "--mca",
        "btl_tcp_if_include",
        "127.0.0.1/8",
        "--mca",
        "btl_tcp_if_bandwidth",
        "lo:2500",
    )
    assert result.code == 0, result.err
    lines = result.out.splitlines()
    chosen = [line for line in lines if '"chosen:' in line]
    assert chosen == [
        'btl:tcp:interface:lo:127.0.0.1/8:"chosen: in btl_tcp_if_include; bandwidth 2500 '
        'Mb/s (btl_tcp_if_bandwidth), latency 100 (btl_tcp_latency)"'
    ]
    assert all(
        '"left out: not in btl_tcp_if_include"' in line for line in lines if line not in chosen
    )
    # By default loopback is chosen, for peers on this host only, and bad items are named.
    result = run_pmca("info", "--tcp-interfaces")
    assert result.code == 0, result.err
    assert "btl tcp lo 127.0.0.1/8: chosen: loopback: peers on this host only" in result.out
    result = run_pmca("info", "--tcp-interfaces", "--mca", "btl_tcp_if_latency", "lo")
    assert result.code != 0 and "btl_tcp_if_latency: 'lo' is not NAME:VALUE" in result.err
