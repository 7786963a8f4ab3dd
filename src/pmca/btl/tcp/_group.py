"""The rails (one module per interface) of one process, and what they share.

The modules of one process share a nonce (proving in each handshake that a
connecting rank read this process's modex entry), one modex address listing
every rail's listening socket, and the pairing of their interfaces with each
peer's, computed once per peer whichever rail asks first.
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING, Protocol

from ..base import host_name
from . import _wire as wire
from ._interfaces import Interface
from ._rails import Pairing, pair

if TYPE_CHECKING:
    from structlog.typing import FilteringBoundLogger

    from .._interface import Proc


class Rail(Protocol):
    """What the group reads of each of its rails."""

    @property
    def interface(self) -> Interface: ...

    @property
    def port(self) -> int: ...


class RailGroup:
    """The rails (one module per interface) of one process: its nonce, its modex address,
    and the pairing of its interfaces with each peer's (computed once per peer).

    Not a ``Generic`` over the rail type: subscribing ``Generic`` at run time
    fills typing's process-wide cache with a type variable bound to this
    module's ``Rail``, which in dso mode kept every unloaded copy of the tcp
    component's modules alive.
    """

    def __init__(self, log: FilteringBoundLogger) -> None:
        self.nonce = os.urandom(8)
        self.rails: list[Rail] = []
        self.log = log
        self._pairings: dict[int, list[Pairing]] = {}
        self._routes: dict[str, bool] = {}
        self.streams_placed = 0
        self.streams_staged = 0

    def address(self) -> bytes:
        listening = tuple(
            wire.Listening(r.interface.address, r.interface.network.network.prefixlen, r.port)
            for r in self.rails
        )
        return wire.pack_address(wire.TcpAddress(self.nonce, listening))

    def pairings(self, proc: Proc, address: wire.TcpAddress, same_host: bool) -> list[Pairing]:
        found = self._pairings.get(proc.rank)
        if found is None:
            local = [r.interface for r in self.rails]
            found, skipped = pair(
                local, address.interfaces, same_host=same_host, routes=self._routes
            )
            self._pairings[proc.rank] = found
            self.log.info(
                "rails to peer",
                rank=proc.rank,
                host=host_name(proc.host),
                rails=[
                    f"{p.local.name} {p.local.address} -> {p.remote.address} ({p.why})"
                    for p in found
                ],
                unused=skipped,
            )
        return found


__all__ = ["Rail", "RailGroup"]
