"""pmca: Open MPI's Modular Component Architecture on pluggy, with real native memory hooks."""

from __future__ import annotations

from . import btl, memory, native, p2p, patcher, rcache, world
from ._version import __version__
from .mca import (
    Alias,
    Component,
    ComponentContext,
    ComponentError,
    ComponentFailure,
    ComponentInfo,
    ComponentParams,
    ComponentRef,
    ComponentWarning,
    Framework,
    FrameworkBase,
    FrameworkError,
    NotAvailable,
    PmcaError,
    Query,
    SelectionError,
    SessionError,
    StaleReferenceError,
    hookimpl,
    hookspec,
)
from .mca.params import ParamError, ParamWarning, PmcaDeprecationWarning
from .runtime import FrameworkHandle, Session

__all__ = [
    "Alias",
    "Component",
    "ComponentContext",
    "ComponentError",
    "ComponentFailure",
    "ComponentInfo",
    "ComponentParams",
    "ComponentRef",
    "ComponentWarning",
    "Framework",
    "FrameworkBase",
    "FrameworkError",
    "FrameworkHandle",
    "NotAvailable",
    "ParamError",
    "ParamWarning",
    "PmcaDeprecationWarning",
    "PmcaError",
    "Query",
    "SelectionError",
    "Session",
    "SessionError",
    "StaleReferenceError",
    "__version__",
    "btl",
    "hookimpl",
    "hookspec",
    "memory",
    "native",
    "p2p",
    "patcher",
    "rcache",
    "world",
]
