"""pmca: Open MPI's Modular Component Architecture on pluggy, with real native memory hooks.

Dependencies point one way. Each package imports only packages below it
(packages on one line are peers and import neither each other), wherever
the import is (module level, inside a function, under ``TYPE_CHECKING``),
bottom first:

- private helpers ``pmca._version``, ``_build``, ``_records``, ``_lazy``,
  ``_interrupts``, ``_public``, ``_forksafe``, ``_sockets``, ``_job``, then
  ``pmca._libc``;
- ``pmca.mca`` (the component machinery) and ``pmca.native`` (the native hooks);
- ``pmca.runtime``: the shared runtime every framework and session uses
  (state, lock, parameter space, framework open and close, finalize domains);
- ``pmca.world``: the processes a session exchanges addresses with;
- the frameworks, each above those it uses: ``pmca.patcher``, ``pmca.memory``,
  ``pmca.rcache``, ``pmca.btl`` (with its bml);
- ``pmca.p2p``: point-to-point messages over the btls;
- ``pmca.session``: :class:`Session`, which composes the frameworks;
- this package, a lazy facade over the public names above;
- ``pmca.testing``, ``pmca.scenarios``, ``pmca.cli``, then ``pmca.__main__`` (``python -m pmca``).

Nothing below this facade imports a name from it: each takes it from its home.
``tests/core/test_layers.py`` checks this order.
"""

from __future__ import annotations

from ._lazy import lazy_attributes
from ._version import __version__

#: ``typing.TYPE_CHECKING`` without importing typing (mypy goes by the name).
TYPE_CHECKING = False
if TYPE_CHECKING:
    from . import btl, memory, native, p2p, patcher, rcache, world
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
    from .p2p._matching import ANY_SOURCE, ANY_TAG
    from .session import FrameworkHandle, Session

__all__ = [
    "ANY_SOURCE",
    "ANY_TAG",
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

#: Imported at first use: a component pays for what it touches only.
_TARGETS = {
    "btl": ".btl",
    "memory": ".memory",
    "p2p": ".p2p",
    "world": ".world",
    "native": ".native",
    "patcher": ".patcher",
    "rcache": ".rcache",
    "ANY_SOURCE": ".p2p._matching:ANY_SOURCE",
    "ANY_TAG": ".p2p._matching:ANY_TAG",
    "Alias": ".mca:Alias",
    "Component": ".mca:Component",
    "ComponentContext": ".mca:ComponentContext",
    "ComponentError": ".mca:ComponentError",
    "ComponentFailure": ".mca:ComponentFailure",
    "ComponentInfo": ".mca:ComponentInfo",
    "ComponentParams": ".mca:ComponentParams",
    "ComponentRef": ".mca:ComponentRef",
    "ComponentWarning": ".mca:ComponentWarning",
    "Framework": ".mca:Framework",
    "FrameworkBase": ".mca:FrameworkBase",
    "FrameworkError": ".mca:FrameworkError",
    "NotAvailable": ".mca:NotAvailable",
    "PmcaError": ".mca:PmcaError",
    "Query": ".mca:Query",
    "SelectionError": ".mca:SelectionError",
    "SessionError": ".mca:SessionError",
    "StaleReferenceError": ".mca:StaleReferenceError",
    "hookimpl": ".mca:hookimpl",
    "hookspec": ".mca:hookspec",
    "ParamError": ".mca.params:ParamError",
    "ParamWarning": ".mca.params:ParamWarning",
    "PmcaDeprecationWarning": ".mca.params:PmcaDeprecationWarning",
    "FrameworkHandle": ".session:FrameworkHandle",
    "Session": ".session:Session",
}

if not TYPE_CHECKING:  # mypy sees the imports above, and no catch-all
    __getattr__, __dir__ = lazy_attributes(__name__, _TARGETS)
