"""btl/tcp listens on each chosen address, never a wildcard, across simulated hosts."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Callable

import pytest

from pmca.testing import Testbed

pytestmark = pytest.mark.cluster

#: Inside a host: open tcp with the given parameters, then print the addresses the
#: modex publishes, every listening TCP socket of the namespace (from the kernel's
#: tables) and, per address given on the command line, whether any published port
#: takes a connection there.
_PROBE = r"""
import ipaddress, json, socket, sys
import pmca
from pmca.btl.tcp import _wire as wire

def listening():
    found = []
    for path in ("/proc/net/tcp", "/proc/net/tcp6"):
        for line in open(path).read().splitlines()[1:]:
            fields = line.split()
            if fields[3] != "0A":  # TCP_LISTEN
                continue
            host, port = fields[1].split(":")
            raw = bytes.fromhex(host)
            packed = b"".join(raw[i : i + 4][::-1] for i in range(0, len(raw), 4))
            found.append([str(ipaddress.ip_address(packed)), int(port, 16)])
    return sorted(found)

def takes(address, ports):
    family = socket.AF_INET6 if ":" in address else socket.AF_INET
    for port in ports:
        with socket.socket(family) as probe:
            probe.settimeout(10)
            try:
                probe.connect((address, port))
                return True
            except ConnectionRefusedError:
                pass
    return False

mca = json.loads(sys.argv[1])
with pmca.Session(mca=mca, frameworks=["btl"]) as s:
    tcp = next(m for m in s.modules("btl") if m.name == "tcp")
    published = wire.unpack_address(0, tcp.address()).interfaces
    ports = [entry.port for entry in published]
    print(json.dumps({
        "published": sorted([entry.address, entry.port] for entry in published),
        "listening": listening(),
        "taken": {address: takes(address, ports) for address in sys.argv[2:]},
    }))
"""


def test_each_chosen_address_is_bound_and_an_excluded_interface_takes_nothing(
    pmca_env, pmca_testbed: Callable[..., Testbed]
) -> None:
    """Two interfaces chosen (net0, net1, IPv4 and IPv6; loopback too) and one left out
    with btl_tcp_if_exclude (net2): the namespace's listening sockets are exactly the
    published addresses and ports, none is a wildcard, and net2's addresses take no
    connection on any published port."""
    testbed = pmca_testbed(1, networks=3, ipv6=True)
    (host,) = testbed.hosts
    excluded = [host.addresses[2], host.addresses6[2]]
    done = subprocess.run(
        [*testbed.enter_command(host), sys.executable, "-c", _PROBE,
         json.dumps({"btl": "tcp", "btl_tcp_if_exclude": "net2"}), *excluded],
        capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr
    seen = json.loads(done.stdout.strip().splitlines()[-1])
    chosen = {*host.addresses[:2], *host.addresses6[:2], "127.0.0.1", "::1"}
    assert {address for address, _ in seen["published"]} == chosen, seen
    assert seen["listening"] == seen["published"], seen
    assert not {"0.0.0.0", "::"} & {address for address, _ in seen["listening"]}, seen
    assert seen["taken"] == dict.fromkeys(excluded, False), seen


_EAGER = r"""
import json, sys
import pmca

with pmca.Session(mca=json.loads(sys.argv[1]), frameworks=["btl"]) as s:
    tcp = next(m for m in s.modules("btl") if m.name == "tcp")
    print(json.dumps({r.interface.address: r.limits.eager_limit for r in (tcp, *tcp.rails)}))
"""


@pytest.mark.parametrize(("networks", "ipv6", "cut"), [(1, True, False), (2, False, True)])
def test_only_several_links_lower_the_eager_limit_for_striping(
    pmca_env, pmca_testbed: Callable[..., Testbed], networks: int, ipv6: bool, cut: bool
) -> None:
    """One link with an IPv4 and an IPv6 address is one network: its rails keep the
    eager limit (a rendezvous striped over one link gains nothing). Two links cut it
    to the rendezvous limit on every non-loopback rail; loopback keeps it."""
    testbed = pmca_testbed(1, networks=networks, ipv6=ipv6)
    (host,) = testbed.hosts
    mca = {"btl": "tcp", "btl_tcp_eager_limit": "1M", "btl_tcp_rndv_eager_limit": "64K"}
    done = subprocess.run(
        [*testbed.enter_command(host), sys.executable, "-c", _EAGER, json.dumps(mca)],
        capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr
    eager = json.loads(done.stdout.strip().splitlines()[-1])
    links = [*host.addresses[:networks], *host.addresses6[:networks]]
    assert set(links) < set(eager), eager
    assert {eager[a] for a in links} == {64 << 10 if cut else 1 << 20}, eager
    assert eager["127.0.0.1"] == 1 << 20, eager
