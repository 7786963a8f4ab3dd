"""Which IPv4 interfaces the tcp btl uses (``btl_tcp_if_include`` / ``btl_tcp_if_exclude``)."""

from __future__ import annotations

import fcntl
import ipaddress
import socket
import struct

from attrs import frozen

from ..._records import FrozenValue

_SIOCGIFADDR = 0x8915
_SIOCGIFNETMASK = 0x891B


@frozen(eq=False, repr=False)
class Interface(FrozenValue):
    name: str
    network: ipaddress.IPv4Interface

    @property
    def address(self) -> str:
        return str(self.network.ip)


def _ioctl_address(sock: socket.socket, request: int, name: str) -> str:
    packed = struct.pack("256s", name.encode()[:15])
    return socket.inet_ntoa(fcntl.ioctl(sock.fileno(), request, packed)[20:24])


def interfaces() -> list[Interface]:
    """The host's IPv4 interfaces with an address, in kernel order."""
    found: list[Interface] = []
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as sock:
        for _, name in socket.if_nameindex():
            try:
                address = _ioctl_address(sock, _SIOCGIFADDR, name)
                mask = _ioctl_address(sock, _SIOCGIFNETMASK, name)
            except OSError:
                continue
            found.append(Interface(name, ipaddress.IPv4Interface(f"{address}/{mask}")))
    return found


def _matches(interface: Interface, item: str, parameter: str) -> bool:
    if "/" in item or item[:1].isdigit():
        try:
            network = ipaddress.IPv4Network(item, strict=False)
        except ValueError:
            raise ValueError(
                f"{parameter}: {item!r} is neither an interface name nor an IPv4 CIDR"
            ) from None
        return interface.network.ip in network
    return interface.name == item


def select_interfaces(include: list[str], exclude: list[str]) -> list[Interface]:
    """Open MPI's rules: include and exclude are exclusive; items are names or CIDRs."""
    if include and exclude:
        raise ValueError(
            "btl_tcp_if_include and btl_tcp_if_exclude are mutually exclusive; set only one"
        )
    found = interfaces()
    if include:
        chosen = [i for i in found if any(_matches(i, x, "btl_tcp_if_include") for x in include)]
    else:
        chosen = [
            i for i in found if not any(_matches(i, x, "btl_tcp_if_exclude") for x in exclude)
        ]
    # Loopback last: a peer on another host cannot use it, one on this host prefers it.
    chosen.sort(key=lambda i: i.network.ip.is_loopback)
    return chosen
