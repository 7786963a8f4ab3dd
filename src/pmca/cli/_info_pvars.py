"""``pmca info --pvars``: the performance variables this installation declares.

Components declare their pvars when their parameters are registered (the
btl's per-peer counters) or when their package is imported; ``pmca info``
loads every component, so the list is complete without moving a byte.
"""

from __future__ import annotations

import json
from collections.abc import Sequence

from ..mca._pvars import REGISTRY, PVar
from ._text import Parsable, Readable, pvar_fields

__all__ = ["SCHEMA", "listed", "render_pvars"]

SCHEMA = "pmca-info-pvars"
SCHEMA_VERSION = 1


def listed(level: int) -> list[PVar]:
    """Every declared pvar up to ``level``, by name."""
    from ..p2p import _pvars  # noqa: F401  (the message layer's, declared at import)

    return [pvar for pvar in REGISTRY.pvars() if pvar.level <= level]


def _json(pvar: PVar) -> dict[str, object]:
    entry: dict[str, object] = {"name": pvar.name, **dict(pvar_fields(pvar))}
    entry["level"] = pvar.level
    entry["flags"] = [f for f in str(entry["flags"]).split(",") if f]
    return entry


def render_pvars(pvars: Sequence[PVar], *, parsable: bool, as_json: bool, width: int | None) -> str:
    if as_json:
        document = {
            "schema": SCHEMA,
            "schema_version": SCHEMA_VERSION,
            "pvars": [_json(p) for p in pvars],
        }
        return json.dumps(document, indent=2) + "\n"
    if parsable:
        emitter = Parsable()
        for pvar in pvars:
            emitter.pvar(pvar)
        lines = emitter.lines()
    else:
        readable = Readable()
        for pvar in pvars:
            readable.pvar(pvar)
        lines = readable.lines(width=width)
    return "".join(line + "\n" for line in lines)
