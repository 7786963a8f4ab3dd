"""The counts behind the ``patcher_overwrite_*`` pvars.

Apart from the module, which is imported with the first query: the pvars are
declared when the component is registered (``pmca info`` lists them).
"""

from __future__ import annotations

from collections.abc import Callable

#: Patches installed and restored in this process, restores that found the
#: bytes no longer pmca's, and patches refused because another library's
#: jump was already there (the ``patcher_overwrite_*`` pvars read these).
COUNTS = {"installed": 0, "restored": 0, "not_ours": 0, "foreign": 0}


def counted(key: str) -> Callable[[object], float]:
    """A pvar reader of ``COUNTS[key]``."""
    return lambda _obj: COUNTS[key]


__all__ = ["COUNTS", "counted"]
