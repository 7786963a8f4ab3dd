"""How btl/tcp pairs its interfaces with a peer's (no network needed)."""

from __future__ import annotations

import ipaddress

import pytest

import pmca
from pmca.btl.base._modex import RankEntry
from pmca.btl.bml._bml import Route, _build_peer
from pmca.btl.tcp._interfaces import Interface, interfaces, select_interfaces
from pmca.btl.tcp._module import TcpEndpoint
from pmca.btl.tcp._rails import pair
from pmca.btl.tcp._wire import Listening
from pmca.p2p._routes import stripes


def _interface(name: str, cidr: str) -> Interface:
    return Interface(name, ipaddress.ip_interface(cidr))


def _listening(cidr: str, port: int = 1000) -> Listening:
    network = ipaddress.ip_interface(cidr)
    return Listening(str(network.ip), network.network.prefixlen, port)


A = [
    _interface("a0", "198.18.0.1/24"),
    _interface("a1", "198.18.1.1/24"),
    _interface("lo", "127.0.0.1/8"),
]
B = [
    _interface("b0", "198.18.1.2/24"),
    _interface("b1", "198.18.0.2/24"),
    _interface("lo", "127.0.0.1/8"),
]


def _as_listening(interfaces: list[Interface]) -> list[Listening]:
    return [_listening(str(i.network)) for i in interfaces]


def test_same_subnets_pair_up_the_same_way_from_both_ends() -> None:
    routes = {"127.0.0.1": True}
    from_a, _ = pair(A, _as_listening(B), same_host=False, routes=routes)
    from_b, _ = pair(B, _as_listening(A), same_host=False, routes=routes)
    seen_a = {(p.local.address, p.remote.address) for p in from_a}
    seen_b = {(p.remote.address, p.local.address) for p in from_b}
    assert seen_a == seen_b == {("198.18.0.1", "198.18.0.2"), ("198.18.1.1", "198.18.1.2")}
    assert all("same subnet" in p.why for p in from_a)


def test_loopback_is_never_offered_to_another_host() -> None:
    found, _ = pair(A[2:], _as_listening(B[2:]), same_host=False, routes={})
    assert found == []


def test_a_peer_on_this_host_is_reached_over_loopback() -> None:
    found, _ = pair(A, _as_listening(B), same_host=True, routes={})
    assert [(p.local.name, p.remote.address) for p in found] == [("lo", "127.0.0.1")]


def test_a_pair_without_a_route_is_not_used() -> None:
    local = [_interface("a0", "198.18.0.1/24")]
    remote = [_listening("198.19.5.5/24")]
    found, skipped = pair(local, remote, same_host=False, routes={"198.19.5.5": False})
    assert found == [] and "no route" in skipped[0]
    found, _ = pair(local, remote, same_host=False, routes={"198.19.5.5": True})
    assert [p.why for p in found] == ["another subnet, routed"]


def test_ipv6_pairs_with_ipv6_only() -> None:
    local = [_interface("a0", "198.18.0.1/24"), _interface("a0", "fd70:6d63:6100::1/64")]
    remote = [_listening("fd70:6d63:6100::2/64")]
    found, skipped = pair(local, remote, same_host=False, routes={})
    assert [(p.local.address, p.remote.address) for p in found] == [
        ("fd70:6d63:6100::1", "fd70:6d63:6100::2")
    ]
    assert any("other address family" in why for why in skipped)


def test_interface_parameters_take_ipv6_cidrs_and_name_bad_items() -> None:
    chosen, _ = select_interfaces(["::1/128"], [])
    assert all(i.network.version == 6 and i.loopback for i in chosen)
    with pytest.raises(ValueError, match="btl_tcp_if_include: 'fd00::zz'"):
        select_interfaces(["fd00::zz"], [])


_TWO_LOOPBACK_RAILS = "127.0.0.1/8,::1/128"
needs_ipv6_loopback = pytest.mark.skipif(
    not any(i.network.version == 6 and i.loopback for i in interfaces()),
    reason="needs the IPv6 loopback address ::1",
)


@needs_ipv6_loopback
def test_configured_rail_bandwidths_weigh_the_bml_stripes() -> None:
    mca = {
        "btl": "self,tcp",
        "btl_tcp_if_include": _TWO_LOOPBACK_RAILS,
        # By CIDR: both rails are on the interface named lo.
        "btl_tcp_if_bandwidth": "127.0.0.0/8:3000,::1/128:1000",
        "btl_tcp_if_latency": "::1/128:7",
    }
    with pmca.Session(mca=mca, frameworks=["btl"]) as s:
        first = next(m for m in s.modules("btl") if m.name == "tcp")
        rails = {m.interface.address: m for m in (first, *first.rails)}
        assert {a: (r.limits.bandwidth, r.limits.latency) for a, r in rails.items()} == {
            "127.0.0.1": (3000, 100),
            "::1": (1000, 7),
        }
        entry = RankEntry(1, 1, "elsewhere", {})
        routes = [Route(rail, TcpEndpoint(1)) for rail in rails.values()]
        peer = _build_peer(1, entry, routes)
        # Latency orders the routes (the eager one first); bandwidth weighs the stripes.
        assert [r.module.interface.address for r in peer.send] == ["::1", "127.0.0.1"]
        size = 64 << 20
        shares = {route.module.interface.address: 0 for route, _ in peer.rdma}
        for route, _offset, length in stripes(peer.rdma, size):
            shares[route.module.interface.address] += length
        assert sum(shares.values()) == size
        assert shares["127.0.0.1"] == pytest.approx(3 * shares["::1"], rel=0.01)


def test_per_interface_values_name_a_bad_item() -> None:
    mca = {"btl": "self,tcp", "btl_tcp_if_include": "lo", "btl_tcp_if_bandwidth": "lo=100"}
    with pmca.Session(mca=mca, frameworks=["btl"]) as s:
        assert [m.name for m in s.modules("btl")] == ["self"]
        (failure,) = s.failures("btl")
        assert "btl_tcp_if_bandwidth: 'lo=100' is not NAME:VALUE" in failure.message
