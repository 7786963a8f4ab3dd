"""Ranks users name (``Session.reach``, p2p's calls): integers of the world, named when wrong.

Anything ``operator.index`` accepts is an integer (numpy integers included);
``bool`` is not, although Python makes it one. Here, below the message
layer, so that asking which btls reach a rank imports none of it.
"""

from __future__ import annotations

import operator


def as_integer(value: object, what: str, where: str) -> int:
    """``value`` as an int; a :class:`TypeError` naming ``what`` and ``where`` otherwise."""
    if type(value) is int:
        return value
    if isinstance(value, bool):
        raise TypeError(f"{where}: {what} {value!r} is a bool, not an integer")
    try:
        return operator.index(value)  # type: ignore[arg-type]
    except TypeError:
        raise TypeError(
            f"{where}: {what} {value!r} is a {type(value).__name__}, not an integer"
        ) from None


def check_rank(rank: object, size: int, where: str, *, any_source: int | None = None) -> int:
    """``rank`` as an int of a world of ``size``; ``any_source`` (p2p's wildcard) too
    where given; a clear error otherwise."""
    value = as_integer(rank, "rank", where)
    if 0 <= value < size or (any_source is not None and value == any_source):
        return value
    allowed = f"0..{size - 1}"
    if any_source is not None:
        allowed += " or pmca.ANY_SOURCE"
    raise ValueError(f"{where}: rank {value} is outside the world ({allowed})")


__all__ = ["as_integer", "check_rank"]
