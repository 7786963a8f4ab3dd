"""The rcache framework: registration caches for network transports [opal/mca/rcache].

A transport creates its cache with :func:`create`::

    import pmca

    with pmca.Session():
        rc = pmca.rcache.create("grdma", backend)   # backend: pmca.rcache.Backend
        reg = rc.register(address, size)            # pinned, refcounted, page-rounded
        ...                                         # move data with reg.handle
        rc.deregister(reg)                          # cached (leave_pinned) or released

The cache drains the memory hooks' release events before every lookup, so a
registration whose memory went back to the operating system is never handed
out again.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from .._lazy import lazy_attributes
from ._framework import FRAMEWORK, RcacheBase
from ._interface import Backend, RcacheError, RcacheModule, RegistrationCache

if TYPE_CHECKING:
    from ._backends import UnpinnedBackend, UnpinnedHandle
    from ._registration import CacheStats, Registration

# The unpinned backend (tests, examples, a transport without pinning) and the
# records a cache hands out are imported at first use: a session's rcache
# never needs them until a cache is created.
_TARGETS = {
    "UnpinnedBackend": "._backends:UnpinnedBackend",
    "UnpinnedHandle": "._backends:UnpinnedHandle",
    "CacheStats": "._registration:CacheStats",
    "Registration": "._registration:Registration",
}
if not TYPE_CHECKING:  # mypy sees the imports above, and no catch-all
    __getattr__, __dir__ = lazy_attributes(__name__, _TARGETS)


def create(name: str, backend: Backend, **options: Any) -> RegistrationCache:
    """A new registration cache from the selected rcache component ``name``.

    ``options`` override that component's parameters for this cache (for
    grdma: ``leave_pinned``, ``cache_max_bytes``).  Needs a live session with
    the rcache framework open; raises :class:`RcacheError` naming what is
    missing otherwise.
    """
    from ..runtime import RUNTIME

    if not isinstance(backend, Backend):
        raise RcacheError(
            f"rcache backend {backend!r} has no register(base, size)/deregister(handle)"
        )
    state = RUNTIME.frameworks.get(FRAMEWORK.name)
    if state is None:
        raise RcacheError(
            f"cannot create rcache {name!r}: no pmca session has the rcache framework open"
        )
    selected = []
    for loaded in state.selected:
        selected.append(loaded.component.name)
        if loaded.component.name == name and isinstance(loaded.module, RcacheModule):
            return loaded.module.create(backend, **options)
    why = ", ".join(f"{n}: {reason}" for n, reason in state.not_available.items())
    raise RcacheError(
        f"rcache component {name!r} is not selected (selected: {', '.join(selected) or 'none'}; "
        f"rcache={state.host.params.value('rcache')!r}"
        + (f"; not available: {why}" if why else "")
        + ")"
    )


def caches() -> list[RegistrationCache]:
    """Every cache open in this process (empty without a live session)."""
    from ..runtime import RUNTIME

    state = RUNTIME.frameworks.get(FRAMEWORK.name)
    if state is None:
        return []
    return [
        cache
        for module in state.modules()
        if isinstance(module, RcacheModule)
        for cache in module.caches()
    ]


def describe_stats(stats: CacheStats) -> str:
    """One line of counters, as ``pmca info`` shows them."""
    return (
        f"hits {stats.hits}, misses {stats.misses}, evictions {stats.evictions}, "
        f"invalidations {stats.invalidations}, pinned {stats.pinned_bytes} bytes "
        f"in {stats.registrations} registrations ({stats.cached} cached unused)"
    )


__all__ = [
    "FRAMEWORK",
    "Backend",
    "CacheStats",
    "RcacheBase",
    "RcacheError",
    "RcacheModule",
    "Registration",
    "RegistrationCache",
    "UnpinnedBackend",
    "UnpinnedHandle",
    "caches",
    "create",
    "describe_stats",
]
