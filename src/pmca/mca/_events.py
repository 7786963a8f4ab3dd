"""Events, after MPI_T events: typed records a framework emits, callbacks a tool registers.

An event type has a name (``<framework>_<component>_<name>``), named fields,
a level and a description. A callback is registered for one type with a
:class:`Safety`: the most restrictive place it may run. A source emits with
the safety of where it runs; a callback that does not allow that place is
not called (its ``dropped`` count grows instead). No source emits from a
memory hook or a signal handler: release events come from the drain or the
listener thread, as release callbacks do.

Emitting with no callback registered is one dict lookup.
"""

from __future__ import annotations

import enum
import threading
import warnings
from collections import deque
from collections.abc import Callable, Mapping
from typing import Any

from attrs import frozen

from .._public import public
from .._records import FrozenValue
from ._names import check_component_name, check_framework_name
from ._pvars import PVarError

__all__ = [
    "EVENTS",
    "DeferredEvents",
    "EventCallback",
    "EventRegistration",
    "EventType",
    "Events",
    "Safety",
    "component_failed",
    "component_selected",
]


@public
class Safety(enum.IntEnum):
    """Where a callback may run, least to most restrictive (MPI_T_cb_safety)."""

    #: Only in a thread that called into pmca (progress, a wait, a session call).
    NONE = 0
    #: Also in a thread of pmca's own (the release-event listener).
    THREAD_SAFE = 1
    #: Anywhere, even while the process holds internal locks (pmca never needs it).
    ASYNC_SIGNAL_SAFE = 2


@public
@frozen(eq=False, repr=False)
class EventType(FrozenValue):
    name: str
    fields: tuple[str, ...]
    level: int
    description: str


#: ``callback(event_type_name, fields)``.
EventCallback = Callable[[str, Mapping[str, Any]], None]


@public
class EventRegistration:
    """One callback on one event type; :meth:`unregister` removes it."""

    def __init__(self, events: Events, name: str, callback: EventCallback, safety: Safety) -> None:
        self._events = events
        self.name = name
        self.callback = callback
        self.safety = safety
        #: Events not delivered because they came from a place ``safety`` excludes.
        self.dropped = 0
        self.delivered = 0

    def unregister(self) -> None:
        self._events._remove(self)


class Events:
    """The process's event types and their callbacks."""

    def __init__(self) -> None:
        self._types: dict[str, EventType] = {}
        self._callbacks: dict[str, tuple[EventRegistration, ...]] = {}
        self._first: dict[str, Callable[[], None]] = {}
        self._lock = threading.Lock()

    def declare(
        self,
        framework: str,
        component: str,
        name: str,
        fields: tuple[str, ...],
        *,
        description: str,
        level: int = 4,
        on_first_callback: Callable[[], None] | None = None,
    ) -> EventType:
        """Declare ``<framework>_<component>_<name>``; declaring it again is harmless.

        ``on_first_callback`` runs when the first callback registers (a source
        that costs something, like a release subscription, starts only then).
        """
        check_framework_name(framework)
        check_component_name(component)
        check_component_name(name)
        if level not in range(1, 10):
            raise PVarError(f"event {name!r}: level {level!r} is outside 1..9")
        full = f"{framework}_{component}_{name}"
        event = EventType(full, tuple(fields), level, description)
        with self._lock:
            known = self._types.setdefault(full, event)
            if known.fields != event.fields:
                raise PVarError(
                    f"event {full!r} declared again with fields {event.fields}; "
                    f"it has {known.fields}"
                )
            if on_first_callback is not None:
                self._first[full] = on_first_callback
        return known

    def types(self) -> list[EventType]:
        with self._lock:
            return [self._types[name] for name in sorted(self._types)]

    def register(
        self, name: str, callback: EventCallback, safety: Safety = Safety.NONE
    ) -> EventRegistration:
        """Call ``callback(name, fields)`` for each event of type ``name``."""
        if not callable(callback):
            raise TypeError(f"event callback for {name!r} is not callable: {callback!r}")
        if not isinstance(safety, Safety):
            raise TypeError(f"event callback safety must be a pmca.mca.Safety, not {safety!r}")
        with self._lock:
            if name not in self._types:
                raise PVarError(
                    f"no event type named {name!r} (declared: {', '.join(sorted(self._types))})"
                )
            registration = EventRegistration(self, name, callback, safety)
            before = self._callbacks.get(name, ())
            self._callbacks[name] = (*before, registration)
            start = None if before else self._first.get(name)
        if start is not None:
            start()
        return registration

    def _remove(self, registration: EventRegistration) -> None:
        with self._lock:
            current = self._callbacks.get(registration.name, ())
            self._callbacks[registration.name] = tuple(r for r in current if r is not registration)

    def wanted(self, name: str) -> bool:
        """Whether anyone listens (a source may skip building the fields)."""
        return bool(self._callbacks.get(name))

    def emit(self, name: str, where: Safety, fields: Mapping[str, Any]) -> None:
        """Deliver one event from a place of safety ``where`` to the callbacks allowing it."""
        for registration in self._callbacks.get(name, ()):
            if registration.safety < where:
                registration.dropped += 1
                continue
            registration.delivered += 1
            try:
                registration.callback(name, fields)
            except Exception as exc:  # one tool must not break the source or the others
                warnings.warn(
                    f"pmca event callback {registration.callback!r} for {name!r} raised "
                    f"{type(exc).__name__}: {exc}",
                    RuntimeWarning,
                    stacklevel=2,
                )


#: The process's events.
EVENTS = Events()


class DeferredEvents:
    """Events of one type raised where no callback may run (under a lock), delivered later.

    :meth:`defer` only appends to a deque (atomic under the GIL, no lock), and
    only while someone listens; :meth:`deliver` emits what is queued, from a
    place the source chooses (the release drain or listener, or after the
    lock is dropped). At most ``limit`` wait: later ones are counted in
    :attr:`lost` instead of growing the queue of a process nobody drains.
    """

    def __init__(self, name: str, limit: int = 4096, events: Events = EVENTS) -> None:
        self.name = name
        self.limit = limit
        self.lost = 0
        self._events = events
        self._queue: deque[Mapping[str, Any]] = deque()

    def defer(self, fields: Mapping[str, Any]) -> None:
        if not self._events.wanted(self.name):
            return
        if len(self._queue) >= self.limit:
            self.lost += 1
            return
        self._queue.append(fields)

    def __len__(self) -> int:
        return len(self._queue)

    def deliver(self, where: Safety) -> int:
        """Emit every queued event (from a place of safety ``where``); how many."""
        delivered = 0
        while True:
            try:
                fields = self._queue.popleft()
            except IndexError:
                return delivered
            self._events.emit(self.name, where, fields)
            delivered += 1


SELECTED = EVENTS.declare(
    "mca",
    "base",
    "component_selected",
    ("framework", "component", "priority"),
    level=3,
    description="A framework kept a component after selection",
).name
FAILED = EVENTS.declare(
    "mca",
    "base",
    "component_failed",
    ("framework", "component", "hook", "error"),
    level=2,
    description="A component failed in a hook and was skipped",
).name


def component_selected(framework: str, component: str, priority: int | None) -> None:
    if EVENTS.wanted(SELECTED):
        fields = {"framework": framework, "component": component, "priority": priority}
        EVENTS.emit(SELECTED, Safety.NONE, fields)


def component_failed(framework: str, component: str, hook: str, error: BaseException) -> None:
    if EVENTS.wanted(FAILED):
        fields = {
            "framework": framework,
            "component": component,
            "hook": hook,
            "error": f"{type(error).__name__}: {error}",
        }
        EVENTS.emit(FAILED, Safety.NONE, fields)
