"""``pmca info --pvars``: the performance variables (and events) this installation declares.

Components declare their pvars and event types when their parameters are
registered (the btl's per-peer counters) or when their package is imported;
``pmca info`` loads every component, so the list is complete without moving
a byte. ``--all`` adds the event types.
"""

from __future__ import annotations

import json
from collections.abc import Sequence

from ..mca._events import EVENTS, EventType
from ..mca._pvars import REGISTRY, PVar
from ._text import Parsable, Readable, pvar_fields

__all__ = ["SCHEMA", "listed", "listed_events", "render_pvars"]

SCHEMA = "pmca-info-pvars"
SCHEMA_VERSION = 1


def listed(level: int) -> list[PVar]:
    """Every declared pvar up to ``level``, by name."""
    from ..p2p import _pvars  # noqa: F401  (the message layer's, declared at import)

    return [pvar for pvar in REGISTRY.pvars() if pvar.level <= level]


def listed_events(level: int) -> list[EventType]:
    """Every declared event type up to ``level``, by name."""
    from ..btl import bml  # noqa: F401  (peer failure, declared at import)

    return [event for event in EVENTS.types() if event.level <= level]


def _json(pvar: PVar) -> dict[str, object]:
    entry: dict[str, object] = {"name": pvar.name, **dict(pvar_fields(pvar))}
    entry["level"] = pvar.level
    entry["flags"] = [f for f in str(entry["flags"]).split(",") if f]
    return entry


def _event_json(event: EventType) -> dict[str, object]:
    return {
        "name": event.name,
        "fields": list(event.fields),
        "level": event.level,
        "description": event.description,
    }


def render_pvars(
    pvars: Sequence[PVar],
    *,
    parsable: bool,
    as_json: bool,
    width: int | None,
    events: Sequence[EventType] = (),
) -> str:
    """The listing; ``events`` (given with ``--all``) follow the pvars."""
    if as_json:
        document: dict[str, object] = {
            "schema": SCHEMA,
            "schema_version": SCHEMA_VERSION,
            "pvars": [_json(p) for p in pvars],
        }
        if events:
            document["events"] = [_event_json(e) for e in events]
        return json.dumps(document, indent=2) + "\n"
    if parsable:
        emitter = Parsable()
        for pvar in pvars:
            emitter.pvar(pvar)
        for event in events:
            emitter.event(event)
        lines = emitter.lines()
    else:
        readable = Readable()
        for pvar in pvars:
            readable.pvar(pvar)
        for event in events:
            readable.event(event)
        lines = readable.lines(width=width)
    return "".join(line + "\n" for line in lines)
