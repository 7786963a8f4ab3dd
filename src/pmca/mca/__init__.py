"""The component architecture: frameworks, components, parameters, selection, loading."""

from __future__ import annotations

from ._component import Component, Query
from ._context import ComponentContext, ComponentParams, FrameworkParams
from ._errors import (
    ComponentError,
    ComponentWarning,
    FrameworkError,
    LibraryError,
    NotAvailable,
    PmcaError,
    SelectionError,
    SessionError,
    StaleReferenceError,
)
from ._failures import ComponentFailure
from ._framework import Alias, ComponentRef, Framework, FrameworkBase
from ._loader import LoadMode, NativeLibrary
from ._markers import hookimpl, hookspec
from ._open import ComponentInfo, OpenFramework

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
    "FrameworkParams",
    "LibraryError",
    "LoadMode",
    "NativeLibrary",
    "NotAvailable",
    "OpenFramework",
    "PmcaError",
    "Query",
    "SelectionError",
    "SessionError",
    "StaleReferenceError",
    "hookimpl",
    "hookspec",
]
