"""Per-peer traffic counters of every btl module, and their performance variables.

Each module keeps, per peer rank, a two-slot list ``[messages, bytes]`` for
active messages sent (counted when ``sendi`` accepts one or ``send`` takes
one) and received (counted when one is delivered, or placed for a tag's
placer). Counting is a dict lookup and two integer additions under the GIL
on the path that already handles the message: no lock, no atomic. Reading
a pvar sums the matching slot over the live modules of the component.

``btl_<component>_bytes_sent``, ``_messages_sent``, ``_bytes_received`` and
``_messages_received`` are COUNTERs bound per peer (``obj`` is the rank).
RDMA (put/get) bytes are not active messages and are not counted here.
"""

from __future__ import annotations

import functools
import weakref
from collections.abc import Callable, Sequence
from typing import Any, Protocol

from ...mca._pvars import REGISTRY, Binding, PVarClass, PVarFlag


class Counted(Protocol):
    """What the counters need of a module (:class:`~pmca.btl.base.ModuleBase`)."""

    name: str
    sent: dict[int, list[int]]
    received: dict[int, list[int]]
    reachable: set[int]

    def peer_ranks(self) -> list[int]: ...


__all__ = [
    "count_received",
    "counting_send",
    "counting_sendi",
    "declare",
    "noting_peers",
    "register_module",
]

#: Live modules by component name (the pvars read these).
_modules: dict[str, weakref.WeakSet[Counted]] = {}

_COUNTERS = (
    ("messages_sent", "sent", 0, "messages", "Active messages sent to the peer"),
    ("bytes_sent", "sent", 1, "bytes", "Bytes of active messages sent to the peer"),
    (
        "messages_received",
        "received",
        0,
        "messages",
        "Active messages received from the peer",
    ),
    (
        "bytes_received",
        "received",
        1,
        "bytes",
        "Bytes of active messages received from the peer",
    ),
)


def _nbytes(part: Any) -> int:
    return len(part) if type(part) is bytes or type(part) is bytearray else memoryview(part).nbytes


def count_sent(counters: dict[int, list[int]], rank: int, parts: Sequence[Any]) -> None:
    slot = counters.get(rank)
    if slot is None:
        slot = counters[rank] = [0, 0]
    slot[0] += 1
    slot[1] += sum(_nbytes(p) for p in parts)


def count_received(counters: dict[int, list[int]], rank: int, nbytes: int) -> None:
    slot = counters.get(rank)
    if slot is None:
        slot = counters[rank] = [0, 0]
    slot[0] += 1
    slot[1] += nbytes


def counting_sendi(sendi: Callable[..., bool]) -> Callable[..., bool]:
    """``sendi`` that counts the messages it accepted."""

    @functools.wraps(sendi)
    def sendi_counted(self: Counted, endpoint: Any, tag: int, parts: Sequence[Any]) -> bool:
        if sendi(self, endpoint, tag, parts):
            count_sent(self.sent, endpoint.rank, parts)
            return True
        return False

    return sendi_counted


def counting_send(send: Callable[..., None]) -> Callable[..., None]:
    """``send`` that counts the messages it took."""

    @functools.wraps(send)
    def send_counted(
        self: Counted, endpoint: Any, tag: int, parts: Sequence[Any], *args: Any, **kw: Any
    ) -> None:
        send(self, endpoint, tag, parts, *args, **kw)
        count_sent(self.sent, endpoint.rank, parts)

    return send_counted


def noting_peers(add_procs: Callable[..., Any]) -> Callable[..., Any]:
    """``add_procs`` that remembers the ranks it returned an endpoint for."""

    @functools.wraps(add_procs)
    def add_procs_noted(self: Counted, procs: Sequence[Any]) -> Any:
        endpoints = add_procs(self, procs)
        self.reachable.update(
            proc.rank
            for proc, endpoint in zip(procs, endpoints, strict=False)
            if endpoint is not None
        )
        return endpoints

    return add_procs_noted


def _reader(component: str, direction: str, index: int) -> Callable[[Any], float]:
    def read(rank: Any) -> float:
        total = 0
        for module in list(_modules.get(component, ())):
            slot = getattr(module, direction).get(rank)
            if slot is not None:
                total += slot[index]
        return total

    return read


def _peers(component: str) -> Callable[[], list[int]]:
    def peers() -> list[int]:
        ranks: set[int] = set()
        for module in list(_modules.get(component, ())):
            ranks.update(module.peer_ranks())
        return sorted(ranks)

    return peers


def register_module(module: Counted) -> None:
    """Track ``module`` (its component's pvars sum over the live ones)."""
    declare(module.name).add(module)


def declare(component: str) -> weakref.WeakSet[Counted]:
    """Declare ``btl_<component>_*`` (at the component's parameter registration)."""
    live = _modules.get(component)
    if live is None:
        live = _modules[component] = weakref.WeakSet()
        for name, direction, index, unit, description in _COUNTERS:
            REGISTRY.register(
                "btl",
                component,
                name,
                PVarClass.COUNTER,
                _reader(component, direction, index),
                unit=unit,
                level=4,
                binding=Binding.PEER,
                objects=_peers(component),
                flags=PVarFlag.CONTINUOUS,
                description=f"{description} (btl {component}; obj is the peer's rank)",
            )
    return live
