"""The memory framework's performance variables.

Delivery counters are the native ring's and the dispatcher's own
(``pmca.native.stats()``): a read takes the dispatcher's counter lock once,
as ``stats()`` does, and nothing is added to the hooks or the drain. The
support level is the module's own attribute.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Protocol

from ..mca._events import EVENTS, Safety
from ..mca._pvars import REGISTRY, PVarClass, PVarFlag, weak_reader

__all__ = [
    "emit_overwrite",
    "register_delivery_pvars",
    "register_events",
    "register_support_pvar",
]


class _Module(Protocol):
    @property
    def support_now(self) -> int: ...


_DELIVERY = (
    ("events_published", "published", "Release events that entered the native ring"),
    ("events_delivered", "delivered", "(event, subscriber) deliveries of release events"),
    ("events_dropped", "dropped", "Release events lost (full ring, stalled producer, fork)"),
    ("overflows", "overflows", "Overflow notices delivered to subscribers"),
    ("lagged", "lagged", "(event, subscriber) pairs replaced by an overflow notice"),
)


def _stat(field: str) -> Callable[[object], float]:
    def read(_obj: object) -> float:
        from .. import native

        return int(getattr(native.stats(), field))

    return read


def _overwrites(_obj: object) -> float:
    from .. import native

    return native.overwrites_detected()


def register_delivery_pvars(component: str) -> None:
    """``memory_<component>_events_*``: the process's release-event delivery."""
    for name, field, description in _DELIVERY:
        REGISTRY.register(
            "memory",
            component,
            name,
            PVarClass.COUNTER,
            _stat(field),
            unit="events",
            level=4,
            flags=PVarFlag.CONTINUOUS,
            description=description,
        )
    REGISTRY.register(
        "memory",
        component,
        "overwrites_detected",
        PVarClass.COUNTER,
        _overwrites,
        unit="events",
        level=2,
        flags=PVarFlag.CONTINUOUS,
        description="Times another library was found to have overwritten pmca's patches",
    )


def register_support_pvar(component: str, owner: _Module) -> None:
    """``memory_<component>_support``: what the hooks catch now (a STATE, as an int flag)."""
    REGISTRY.register(
        "memory",
        component,
        "support",
        PVarClass.STATE,
        weak_reader(owner, lambda module, _obj: int(module.support_now)),
        level=2,
        owner=owner,
        flags=PVarFlag.READONLY | PVarFlag.CONTINUOUS,
        description="Memory hook support level (pmca.memory.Support flags; 0: no events)",
    )


def register_events(component: str) -> None:
    """``memory_<component>_release`` (batches) and ``memory_<component>_overwrite``.

    The release event subscribes to release events (with ``batch=True``)
    when its first callback registers, which needs a session with the memory
    framework open; the batches come from the drain or the listener thread,
    never from a hook, so callbacks must allow :attr:`Safety.THREAD_SAFE`.
    """
    release = f"memory_{component}_release"

    def subscribe() -> None:
        from . import register_release

        _subscription.append(
            register_release(lambda batch: _emit_batch(release, batch), batch=True)
        )

    EVENTS.declare(
        "memory",
        component,
        "release",
        ("addresses", "lengths", "kinds", "overflow"),
        level=5,
        description="A batch of memory releases: columns (memoryviews valid during the "
        "callback) of addresses, lengths and kind codes (pmca.native.KIND_NAMES); "
        "overflow: treat everything as released",
        on_first_callback=subscribe,
    )
    EVENTS.declare(
        "memory",
        component,
        "overwrite",
        ("symbols", "foreign"),
        level=2,
        description="Another library overwrote pmca's patches of these symbols",
    )


#: The release subscription feeding the event (made once, at the first callback).
_subscription: list[object] = []


def _emit_batch(name: str, batch: Any) -> None:
    fields = {
        "addresses": batch.addresses,
        "lengths": batch.lengths,
        "kinds": batch.kinds,
        "overflow": batch.overflow,
    }
    EVENTS.emit(name, Safety.THREAD_SAFE, fields)


def emit_overwrite(component: str, symbols: tuple[str, ...], foreign: object) -> None:
    name = f"memory_{component}_overwrite"
    if EVENTS.wanted(name):
        EVENTS.emit(name, Safety.THREAD_SAFE, {"symbols": symbols, "foreign": foreign})
