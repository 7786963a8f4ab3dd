"""The component architecture: frameworks, components, parameters, selection, loading."""

from __future__ import annotations

from .._lazy import lazy_attributes

#: ``typing.TYPE_CHECKING`` without importing typing (mypy goes by the name).
TYPE_CHECKING = False
if TYPE_CHECKING:
    from ._component import Component, Query
    from ._component_info import ComponentInfo
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
    from ._events import EventRegistration, EventType, Safety
    from ._failures import ComponentFailure
    from ._framework import Alias, ComponentRef, Framework, FrameworkBase
    from ._loader import LoadMode, NativeLibrary
    from ._markers import hookimpl, hookspec
    from ._open import OpenFramework
    from ._pvar_session import PVarHandle, PVarSession
    from ._pvars import (
        Binding,
        PVar,
        PVarClass,
        PVarError,
        PVarFlag,
        PVarGroup,
        PVarGroupField,
        PVarRegistry,
        PVarWarning,
    )

__all__ = [
    "Alias",
    "Binding",
    "Component",
    "ComponentContext",
    "ComponentError",
    "ComponentFailure",
    "ComponentInfo",
    "ComponentParams",
    "ComponentRef",
    "ComponentWarning",
    "EventRegistration",
    "EventType",
    "Framework",
    "FrameworkBase",
    "FrameworkError",
    "FrameworkParams",
    "LibraryError",
    "LoadMode",
    "NativeLibrary",
    "NotAvailable",
    "OpenFramework",
    "PVar",
    "PVarClass",
    "PVarError",
    "PVarFlag",
    "PVarGroup",
    "PVarGroupField",
    "PVarHandle",
    "PVarRegistry",
    "PVarSession",
    "PVarWarning",
    "PmcaError",
    "Query",
    "Safety",
    "SelectionError",
    "SessionError",
    "StaleReferenceError",
    "hookimpl",
    "hookspec",
]

#: Imported at first use, like :mod:`pmca`'s own names.
_TARGETS = {
    "Component": "._component:Component",
    "Query": "._component:Query",
    "ComponentContext": "._context:ComponentContext",
    "ComponentParams": "._context:ComponentParams",
    "FrameworkParams": "._context:FrameworkParams",
    "ComponentError": "._errors:ComponentError",
    "ComponentWarning": "._errors:ComponentWarning",
    "FrameworkError": "._errors:FrameworkError",
    "LibraryError": "._errors:LibraryError",
    "NotAvailable": "._errors:NotAvailable",
    "PmcaError": "._errors:PmcaError",
    "SelectionError": "._errors:SelectionError",
    "SessionError": "._errors:SessionError",
    "StaleReferenceError": "._errors:StaleReferenceError",
    "ComponentFailure": "._failures:ComponentFailure",
    "EventRegistration": "._events:EventRegistration",
    "EventType": "._events:EventType",
    "Safety": "._events:Safety",
    "Alias": "._framework:Alias",
    "ComponentRef": "._framework:ComponentRef",
    "Framework": "._framework:Framework",
    "FrameworkBase": "._framework:FrameworkBase",
    "LoadMode": "._loader:LoadMode",
    "NativeLibrary": "._loader:NativeLibrary",
    "hookimpl": "._markers:hookimpl",
    "hookspec": "._markers:hookspec",
    "ComponentInfo": "._component_info:ComponentInfo",
    "OpenFramework": "._open:OpenFramework",
    "PVarHandle": "._pvar_session:PVarHandle",
    "PVarSession": "._pvar_session:PVarSession",
    "Binding": "._pvars:Binding",
    "PVar": "._pvars:PVar",
    "PVarClass": "._pvars:PVarClass",
    "PVarError": "._pvars:PVarError",
    "PVarFlag": "._pvars:PVarFlag",
    "PVarGroup": "._pvars:PVarGroup",
    "PVarGroupField": "._pvars:PVarGroupField",
    "PVarRegistry": "._pvars:PVarRegistry",
    "PVarWarning": "._pvars:PVarWarning",
}

if not TYPE_CHECKING:  # mypy sees the imports above, and no catch-all
    __getattr__, __dir__ = lazy_attributes(__name__, _TARGETS)
