"""One line of a parameter file, as :func:`parse_param_file` reads it.

Imported when a parameter file is read (or when the type is named): a
session with no parameter file never builds it.
"""

from __future__ import annotations

import attrs

from ..._public import public
from ..._records import FrozenValue

__all__ = ["Entry"]


@public
@attrs.frozen(eq=False, repr=False)
class Entry(FrozenValue):
    """One ``key = value`` line of a parameter file."""

    key: str
    value: str
    path: str
    lineno: int
