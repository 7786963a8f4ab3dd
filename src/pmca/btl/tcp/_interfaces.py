"""Which interfaces the tcp btl uses (``btl_tcp_if_include`` / ``btl_tcp_if_exclude``).

IPv4 addresses come from the kernel's ioctls, IPv6 ones from
``/proc/net/if_inet6`` (link-local addresses are left out: they need a
scope to be reached). Items of the two parameters are interface names or
CIDRs of either family. Without either, interfaces whose names say they
are bridges of virtual machines or containers (``docker*``, ``virbr*``) are
left out, as Open MPI's users learned to do: they look reachable from every
host and reach none.
"""

from __future__ import annotations

import fcntl
import ipaddress
import socket
import struct

from attrs import frozen

from ..._records import FrozenValue

_SIOCGIFADDR = 0x8915
_SIOCGIFNETMASK = 0x891B
#: Interfaces not used unless named in btl_tcp_if_include.
BRIDGE_PREFIXES = ("docker", "virbr")


@frozen(eq=False, repr=False)
class Interface(FrozenValue):
    name: str
    network: ipaddress.IPv4Interface | ipaddress.IPv6Interface
    #: The link's speed in Mb/s as the kernel reports it (0: not reported).
    speed: int = 0

    @property
    def address(self) -> str:
        return str(self.network.ip)

    @property
    def family(self) -> socket.AddressFamily:
        return socket.AF_INET6 if self.network.version == 6 else socket.AF_INET

    @property
    def loopback(self) -> bool:
        return self.network.ip.is_loopback


def _ioctl_address(sock: socket.socket, request: int, name: str) -> str:
    packed = struct.pack("256s", name.encode()[:15])
    return socket.inet_ntoa(fcntl.ioctl(sock.fileno(), request, packed)[20:24])


def link_speed(name: str) -> int:
    """``/sys/class/net/NAME/speed`` in Mb/s, or 0 where the kernel does not say."""
    try:
        with open(f"/sys/class/net/{name}/speed") as f:
            speed = int(f.read().strip())
    except (OSError, ValueError):
        return 0
    return max(speed, 0)


def _ipv6_interfaces() -> list[Interface]:
    found: list[Interface] = []
    try:
        with open("/proc/net/if_inet6") as f:
            lines = f.read().splitlines()
    except OSError:
        return found
    for line in lines:
        fields = line.split()
        if len(fields) < 6:
            continue
        hexaddr, prefix, scope, name = fields[0], int(fields[2], 16), int(fields[3], 16), fields[5]
        if scope == 0x20:  # link-local: unreachable without a scope id
            continue
        address = ipaddress.IPv6Address(int(hexaddr, 16))
        found.append(Interface(name, ipaddress.IPv6Interface(f"{address}/{prefix}")))
    return found


def interfaces() -> list[Interface]:
    """The host's interfaces with an address (IPv4 first, then IPv6), in kernel order."""
    found: list[Interface] = []
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as sock:
        for _, name in socket.if_nameindex():
            try:
                address = _ioctl_address(sock, _SIOCGIFADDR, name)
                mask = _ioctl_address(sock, _SIOCGIFNETMASK, name)
            except OSError:
                continue
            found.append(Interface(name, ipaddress.IPv4Interface(f"{address}/{mask}")))
    found += _ipv6_interfaces()
    return [Interface(i.name, i.network, link_speed(i.name)) for i in found]


def _matches(interface: Interface, item: str, parameter: str) -> bool:
    if "/" in item or item[:1].isdigit() or ":" in item:
        try:
            network = ipaddress.ip_network(item, strict=False)
        except ValueError:
            raise ValueError(
                f"{parameter}: {item!r} is neither an interface name nor an IPv4/IPv6 CIDR"
            ) from None
        return interface.network.version == network.version and interface.network.ip in network
    return interface.name == item


def select_interfaces(include: list[str], exclude: list[str]) -> tuple[list[Interface], list[str]]:
    """Open MPI's rules: include and exclude are exclusive; items are names or CIDRs.

    Returns the chosen interfaces (loopback last) and why each other one was left out.
    """
    if include and exclude:
        raise ValueError(
            "btl_tcp_if_include and btl_tcp_if_exclude are mutually exclusive; set only one"
        )
    chosen: list[Interface] = []
    dropped: list[str] = []
    for interface in interfaces():
        what = f"{interface.name} {interface.network}"
        if include:
            if any(_matches(interface, x, "btl_tcp_if_include") for x in include):
                chosen.append(interface)
            else:
                dropped.append(f"{what}: not in btl_tcp_if_include")
        elif any(_matches(interface, x, "btl_tcp_if_exclude") for x in exclude):
            dropped.append(f"{what}: in btl_tcp_if_exclude")
        elif interface.name.startswith(BRIDGE_PREFIXES):
            dropped.append(f"{what}: a container/VM bridge (name it in btl_tcp_if_include)")
        else:
            chosen.append(interface)
    # Loopback last: a peer on another host cannot use it, one on this host prefers it.
    chosen.sort(key=lambda i: i.loopback)
    return chosen, dropped
