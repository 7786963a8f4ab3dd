"""Ranks, tags and timeouts users pass to p2p: checked where they enter, named when wrong.

Anything ``operator.index`` accepts is an integer (numpy integers included,
everywhere); ``bool`` is not, although Python makes it one. Tags are
``0..TAG_UB``; receives and probes also take :data:`ANY_SOURCE` and
:data:`ANY_TAG`. A timeout is ``None`` (no limit) or a finite number of
seconds ``>= 0`` (any real number: numpy's too); NaN, which no deadline
compares with, and infinity, which the clock cannot add, are refused.
"""

from __future__ import annotations

import math
import numbers

from ..btl.bml._ranks import as_integer
from ..btl.bml._ranks import check_rank as _check_rank
from ._matching import ANY_SOURCE, ANY_TAG, TAG_UB


def check_tag(tag: object, where: str, *, wildcard: bool) -> int:
    """``tag`` as an int; ``ANY_TAG`` only where ``wildcard``; a clear error otherwise."""
    value = as_integer(tag, "tag", where)
    if 0 <= value <= TAG_UB or (wildcard and value == ANY_TAG):
        return value
    allowed = f"0..{TAG_UB} (2**62 - 1)"
    if wildcard:
        allowed += " or pmca.ANY_TAG"
    raise ValueError(f"{where}: tag {value} is outside {allowed}")


def check_rank(rank: object, size: int, where: str, *, wildcard: bool) -> int:
    """``rank`` as an int of a world of ``size``; ``ANY_SOURCE`` only where ``wildcard``."""
    return _check_rank(rank, size, where, any_source=ANY_SOURCE if wildcard else None)


def check_timeout(timeout: object, where: str) -> float | None:
    """``timeout`` in seconds as a float, ``None`` for no limit; a clear error otherwise."""
    if timeout is None:
        return None
    if isinstance(timeout, bool) or not isinstance(timeout, numbers.Real):
        raise TypeError(
            f"{where}: timeout {timeout!r} is a {type(timeout).__name__}, "
            "not a number of seconds (or None)"
        )
    try:
        seconds = float(timeout)
    except OverflowError:  # an int beyond any float
        seconds = math.inf
    if not 0.0 <= seconds < math.inf:  # NaN fails both comparisons
        raise ValueError(
            f"{where}: timeout {timeout!r} is not a finite number of seconds >= 0 "
            "(None waits without limit)"
        )
    return seconds


__all__ = ["check_rank", "check_tag", "check_timeout"]
