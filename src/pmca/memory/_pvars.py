"""The memory framework's performance variables.

Delivery counters are the native ring's and the dispatcher's own, read in
place: ``published`` and ``dropped`` are the ring's words seen through
ctypes views the backend keeps (no call into the library), ``delivered``,
``overflows`` and ``lagged`` the dispatcher's integer attributes, read
without its counter lock (each is one int under the GIL; the lock only keeps
the four of a chunk together, which one pvar does not need). A read costs
an attribute access: a tool polling every pvar every millisecond adds
nothing to the hooks or the drain. The support level is the module's own
attribute.
"""

from __future__ import annotations

import weakref
from collections.abc import Callable
from typing import Any, Protocol

from ..mca._events import EVENTS, Safety
from ..mca._pvars import REGISTRY, PVarClass, PVarFlag, PVarGroup

__all__ = [
    "emit_overwrite",
    "register_delivery_pvars",
    "register_events",
    "register_support_pvar",
    "support_source",
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


class _InPlace:
    """The ring's words and the dispatcher's counters, resolved at the first read."""

    def __init__(self) -> None:
        from .. import native

        ring = native.backend()
        counters = native.dispatcher().counters
        self.published = ring.head_word
        self.dropped = ring.dropped_word
        self.counters = counters


_in_place: list[_InPlace] = []


def _stat(field: str) -> Callable[[object], float]:
    if field in ("published", "dropped"):
        # A ctypes view of the ring's word: reading ``.value`` is a load.
        def word(_obj: object) -> float:
            source = _in_place[0] if _in_place else _resolve()
            view = source.published if field == "published" else source.dropped
            return int(view.value)

        return word

    def counter(_obj: object) -> float:
        source = _in_place[0] if _in_place else _resolve()
        return int(getattr(source.counters, field))

    return counter


def _resolve() -> _InPlace:
    _in_place.append(_InPlace())
    return _in_place[0]


def _overwrites(_obj: object) -> float:
    # the import statement would cost more than the read: tools sweep this often
    read = _overwrites_read[0] if _overwrites_read else _resolve_overwrites()
    return read()


_overwrites_read: list[Callable[[], int]] = []


def _resolve_overwrites() -> Callable[[], int]:
    from .. import native

    _overwrites_read.append(native.overwrites_detected)
    return _overwrites_read[0]


#: The members of the delivery group (_DELIVERY's fields and the
#: overwrites), in the order _delivery gives them.
_DELIVERY_MEMBERS = ("published", "delivered", "dropped", "overflows", "lagged", "overwrites")


def _delivery(_obj: object) -> list[int]:
    """Every delivery counter and the overwrites, in _DELIVERY_MEMBERS' order."""
    source = _in_place[0] if _in_place else _resolve()
    counters = source.counters
    return [
        int(source.published.value),
        int(counters.delivered),
        int(source.dropped.value),
        int(counters.overflows),
        int(counters.lagged),
        int(_overwrites(None)),
    ]


_DELIVERY_GROUP = PVarGroup(_delivery)


def register_delivery_pvars(component: str) -> None:
    """``memory_<component>_events_*``: the process's release-event delivery."""
    for name, field, description in _DELIVERY:
        REGISTRY.register(
            "memory",
            component,
            name,
            PVarClass.COUNTER,
            _stat(field),
            group=_DELIVERY_GROUP.field(_DELIVERY_MEMBERS.index(field)),
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
        group=_DELIVERY_GROUP.field(_DELIVERY_MEMBERS.index("overwrites")),
        unit="events",
        level=2,
        flags=PVarFlag.CONTINUOUS,
        description="Times a check found pmca's patches, or the libc prologues UCX's ucm "
        "hooks live in while memory/ucm is subscribed, written over by another library",
    )


#: The module each component's support pvar reads (its latest), held weakly.
_support_of: dict[str, weakref.ref[_Module]] = {}


def register_support_pvar(component: str) -> None:
    """``memory_<component>_support``: what the hooks of the component's latest
    module (:func:`support_source`) catch now, a STATE as an int flag; 0 before
    one is made and once it is gone. Registered at import, so listed before any
    module exists."""

    def support(_obj: object) -> float:
        ref = _support_of.get(component)
        module = None if ref is None else ref()
        return 0 if module is None else int(module.support_now)

    REGISTRY.register(
        "memory",
        component,
        "support",
        PVarClass.STATE,
        support,
        level=2,
        flags=PVarFlag.READONLY | PVarFlag.CONTINUOUS,
        description="Memory hook support level (pmca.memory.Support flags; 0: no events)",
    )


def support_source(component: str, module: _Module) -> None:
    """``module`` is what ``memory_<component>_support`` reads from now on."""
    _support_of[component] = weakref.ref(module)


def register_events(component: str, overwritten: str) -> None:
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
        description=overwritten,
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
