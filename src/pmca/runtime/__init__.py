"""The session runtime: sessions, shared state and ordered shutdown."""

from __future__ import annotations

from ._domains import CleanupFailure, FinalizeDomain
from ._handle import FrameworkHandle
from ._inventory import ComponentEntry, FrameworkEntry, inventory
from ._runtime import RUNTIME, Runtime
from ._session import Session

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
