"""The session runtime: sessions, shared state and ordered shutdown."""

from __future__ import annotations

from .._lazy import lazy_attributes
from ._domains import FinalizeDomain
from ._handle import FrameworkHandle
from ._runtime import RUNTIME, Runtime
from ._session import Session

#: ``typing.TYPE_CHECKING`` without importing typing (mypy goes by the name).
TYPE_CHECKING = False
if TYPE_CHECKING:
    from ._failures import CleanupFailure
    from ._inventory import ComponentEntry, FrameworkEntry, inventory

__all__ = [
    "RUNTIME",
    "CleanupFailure",
    "ComponentEntry",
    "FinalizeDomain",
    "FrameworkEntry",
    "FrameworkHandle",
    "Runtime",
    "Session",
    "inventory",
]

#: ``pmca info``'s and ``pmca doctor``'s, and a failed cleanup's record: imported
#: at first use, not by every session.
_TARGETS = {
    "CleanupFailure": "._failures:CleanupFailure",
    "ComponentEntry": "._inventory:ComponentEntry",
    "FrameworkEntry": "._inventory:FrameworkEntry",
    "inventory": "._inventory:inventory",
}

if not TYPE_CHECKING:  # mypy sees the imports above, and no catch-all
    __getattr__, __dir__ = lazy_attributes(__name__, _TARGETS)
