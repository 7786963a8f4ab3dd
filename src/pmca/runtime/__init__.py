"""The shared runtime: what every framework and every session share.

Its state and lock, the parameter space, framework open and close, and the
finalize domains. It sits below the frameworks, which take "the current
runtime" (:data:`RUNTIME`) from here; sessions (:mod:`pmca.session`) sit
above them. It imports no framework module: pmca's own framework
declarations are loaded by name at first open, as third-party ones are
from entry points.
"""

from __future__ import annotations

from .._lazy import lazy_attributes
from ._domains import FinalizeDomain
from ._runtime import RUNTIME, Runtime

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
    "Runtime",
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
