"""Which local interface talks to which interface of a peer (Open MPI's ``reachable``).

Every rank computes the same pairing from the same modex data, so both ends
of a rail agree on it without a word: pairs are weighed (same subnet 2,
another subnet with a route 1, no route or another family: never), then
taken greedily, best first, ties broken by the pair's two addresses in
sorted order (the same order seen from either end), each interface used
once. A peer on this host is reached over loopback when both ends listen
on it, and a peer on another host never is.
"""

from __future__ import annotations

import errno
import socket
from collections.abc import Sequence

from attrs import frozen

from ..._records import FrozenValue
from ._interfaces import Interface
from ._wire import Listening

SAME_SUBNET = 2
ROUTED = 1


@frozen(eq=False, repr=False)
class Pairing(FrozenValue):
    """One rail to one peer: this process's interface, the peer's, and why."""

    local: Interface
    remote: Listening
    why: str


def _routed(remote: Listening, cache: dict[str, bool]) -> bool:
    """Whether the kernel has a route to ``remote`` (a UDP connect sends nothing)."""
    if remote.address not in cache:
        family = socket.AF_INET6 if remote.ip.version == 6 else socket.AF_INET
        with socket.socket(family, socket.SOCK_DGRAM) as probe:
            try:
                probe.connect((remote.address, 9))
                cache[remote.address] = True
            except OSError as exc:
                cache[remote.address] = exc.errno not in (errno.ENETUNREACH, errno.EHOSTUNREACH)
    return cache[remote.address]


def _weight(local: Interface, remote: Listening, routes: dict[str, bool]) -> tuple[int, str]:
    if local.network.version != remote.ip.version:
        return 0, "other address family"
    same = remote.ip in local.network.network
    if same:
        return SAME_SUBNET, f"same subnet {local.network.network}"
    if _routed(remote, routes):
        return ROUTED, "another subnet, routed"
    return 0, "no route"


def pair(
    local: Sequence[Interface],
    remote: Sequence[Listening],
    *,
    same_host: bool,
    routes: dict[str, bool] | None = None,
) -> tuple[list[Pairing], list[str]]:
    """The rails to one peer, and why each other combination was left out."""
    routes = {} if routes is None else routes
    skipped: list[str] = []
    if same_host:
        loop_local = [i for i in local if i.loopback]
        loop_remote = [r for r in remote if r.ip.is_loopback]
        for interface in loop_local:
            match = next(
                (r for r in loop_remote if r.ip.version == interface.network.version), None
            )
            if match is not None:
                return [Pairing(interface, match, "same host: loopback")], skipped
    candidates: list[tuple[int, tuple[str, str], Interface, Listening, str]] = []
    for interface in local:
        for entry in remote:
            if (interface.loopback or entry.ip.is_loopback) and not same_host:
                continue  # never loopback to another host
            weight, why = _weight(interface, entry, routes)
            if not weight:
                skipped.append(f"{interface.address} -> {entry.address}: {why}")
                continue
            key = tuple(sorted((interface.address, entry.address)))
            candidates.append((weight, (key[0], key[1]), interface, entry, why))
    candidates.sort(key=lambda c: (-c[0], c[1]))
    used_local: set[str] = set()
    used_remote: set[str] = set()
    chosen: list[Pairing] = []
    for _, _, interface, entry, why in candidates:
        if interface.address in used_local or entry.address in used_remote:
            continue
        used_local.add(interface.address)
        used_remote.add(entry.address)
        chosen.append(Pairing(interface, entry, why))
    return chosen, skipped


__all__ = ["Pairing", "pair"]
