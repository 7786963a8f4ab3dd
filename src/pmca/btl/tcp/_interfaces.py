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
from .._interface import Limits

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


def per_interface(items: list[str], parameter: str) -> list[tuple[str, int]]:
    """Parse ``NAME:VALUE`` items (NAME an interface name or a CIDR, VALUE >= 0)."""
    parsed: list[tuple[str, int]] = []
    for item in items:
        where, colon, value = item.rpartition(":")
        try:
            number = int(value) if colon and where else -1
        except ValueError:
            number = -1
        if number < 0:
            raise ValueError(
                f"{parameter}: {item!r} is not NAME:VALUE (an interface name or CIDR, a "
                "colon, a whole number >= 0)"
            )
        if "/" in where or where[:1].isdigit() or ":" in where:
            _matches(Interface("", ipaddress.ip_interface("0.0.0.0")), where, parameter)
        parsed.append((where, number))
    return parsed


def configured(interface: Interface, entries: list[tuple[str, int]], parameter: str) -> int | None:
    """The value the first matching ``NAME:VALUE`` entry gives ``interface``, if any."""
    for where, value in entries:
        if _matches(interface, where, parameter):
            return value
    return None


def rail_bandwidth(
    interface: Interface, limits: Limits, entries: list[tuple[str, int]]
) -> tuple[int, str]:
    """A rail's bandwidth and where it came from: btl_tcp_if_bandwidth, the kernel's
    link speed, else btl_tcp_bandwidth (veth and loopback report no speed)."""
    value = configured(interface, entries, "btl_tcp_if_bandwidth")
    if value is not None:
        return value, "btl_tcp_if_bandwidth"
    if interface.speed:
        return interface.speed, "link speed"
    return limits.bandwidth, "btl_tcp_bandwidth"


def rail_latency(
    interface: Interface, limits: Limits, entries: list[tuple[str, int]]
) -> tuple[int, str]:
    """A rail's latency and where it came from: btl_tcp_if_latency, else btl_tcp_latency."""
    value = configured(interface, entries, "btl_tcp_if_latency")
    if value is not None:
        return value, "btl_tcp_if_latency"
    return limits.latency, "btl_tcp_latency"


def choose(include: list[str], exclude: list[str]) -> list[tuple[Interface, bool, str]]:
    """Every interface with an address: whether tcp uses it, and why (Open MPI's rules:
    include and exclude are exclusive; items are names or CIDRs)."""
    if include and exclude:
        raise ValueError(
            "btl_tcp_if_include and btl_tcp_if_exclude are mutually exclusive; set only one"
        )
    verdicts: list[tuple[Interface, bool, str]] = []
    for interface in interfaces():
        if include:
            named = any(_matches(interface, x, "btl_tcp_if_include") for x in include)
            why = "in btl_tcp_if_include" if named else "not in btl_tcp_if_include"
            verdicts.append((interface, named, why))
        elif any(_matches(interface, x, "btl_tcp_if_exclude") for x in exclude):
            verdicts.append((interface, False, "in btl_tcp_if_exclude"))
        elif interface.name.startswith(BRIDGE_PREFIXES):
            why = "a container/VM bridge (name it in btl_tcp_if_include)"
            verdicts.append((interface, False, why))
        elif interface.loopback:
            verdicts.append((interface, True, "loopback: peers on this host only"))
        else:
            verdicts.append((interface, True, "default"))
    return verdicts


def select_interfaces(include: list[str], exclude: list[str]) -> tuple[list[Interface], list[str]]:
    """The chosen interfaces (loopback last) and why each other one was left out."""
    verdicts = choose(include, exclude)
    chosen = [interface for interface, used, _ in verdicts if used]
    dropped = [f"{i.name} {i.network}: {why}" for i, used, why in verdicts if not used]
    # Loopback last: a peer on another host cannot use it, one on this host prefers it.
    chosen.sort(key=lambda i: i.loopback)
    return chosen, dropped


def report(
    include: list[str],
    exclude: list[str],
    bandwidth: list[tuple[str, int]],
    latency: list[tuple[str, int]],
    limits: Limits,
) -> list[tuple[str, str]]:
    """``(interface, verdict)`` per interface: what ``pmca info`` and verbosity 1 show."""
    lines: list[tuple[str, str]] = []
    for interface, used, why in choose(include, exclude):
        what = f"{interface.name} {interface.network}"
        if not used:
            lines.append((what, f"left out: {why}"))
            continue
        mbits, mbits_from = rail_bandwidth(interface, limits, bandwidth)
        delay, delay_from = rail_latency(interface, limits, latency)
        lines.append(
            (
                what,
                f"chosen: {why}; bandwidth {mbits} Mb/s ({mbits_from}), "
                f"latency {delay} ({delay_from})",
            )
        )
    return lines
