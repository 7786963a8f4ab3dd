"""rcache/grdma: Open MPI's general-purpose registration cache, with a native index.

Its interval tree lives in this component's own native library, loaded
through pmca's loader: in ``dso`` mode it is really unloaded at the last
close, after the framework has closed every cache.
"""

from __future__ import annotations

from ..._lazy import lazy_attributes
from ..._version import __version__
from ...mca import Component, ComponentContext, Query, hookimpl
from ...mca._context import ComponentParams
from ...mca.params import within
from ._pvars import register_pvars

TYPE_CHECKING = False  # typing.TYPE_CHECKING, without importing typing for it
if TYPE_CHECKING:
    from ._cache import PAGE, GrdmaCache, page_range
    from ._module import OPTIONS, GrdmaModule
    from ._tree import IntervalTree


register_pvars()


class GrdmaComponent(Component):
    framework = "rcache"
    name = "grdma"
    version = __version__
    api_version = "1.0.0"

    @hookimpl
    def register(self, params: ComponentParams) -> None:
        params.register(
            "priority", type=int, default=50, level=9, help="Priority of the grdma rcache component"
        )
        params.register(
            "cache_max_bytes",
            type="size",
            default=1 << 30,
            level=3,
            help="With mpi_leave_pinned, the most bytes that unused registrations may keep "
            "pinned; the least recently used go first (0: no limit)",
        )
        params.register(
            "pending_max",
            type=int,
            default=65536,
            level=9,
            help="Release events a cache records between two operations before it treats "
            "them as lost and invalidates every registration (at least 1: 0 would drop "
            "every cached registration at each release)",
            **within(1, 2**31 - 1),
        )

        params.register(
            "print_stats",
            type=bool,
            default=False,
            level=9,
            help="Print each cache's counters (hits, misses, evictions, invalidations, "
            "pinned bytes) to stderr when it closes",
        )

    @hookimpl
    def query(self, ctx: ComponentContext) -> Query:
        from ._module import GrdmaModule
        from ._tree import LIBRARY_FILE

        holder: list[GrdmaModule] = []
        library = ctx.load_library(LIBRARY_FILE, before_unload=lambda: _close_left(holder))
        module = GrdmaModule(
            library.cdll,
            leave_pinned=int(ctx.host.params.value("mpi_leave_pinned")),
            cache_max_bytes=int(ctx.params["cache_max_bytes"]),
            pending_max=int(ctx.params["pending_max"]),
            print_stats=bool(ctx.params["print_stats"]),
            log=ctx.log,
        )
        holder.append(module)
        return Query(priority=int(ctx.params["priority"]), module=module)


def _close_left(holder: list[GrdmaModule]) -> str | None:
    """The loader's unload guard: no index library unloads under a live cache."""
    module = holder.pop() if holder else None
    if module is None:
        return None
    count = len(module.caches())
    module.close_all()  # also frees the handles of the caches closed before
    if not count:
        return None
    return f"unloading rcache/grdma while {count} cache(s) were open: closed them first"


__all__ = [
    "OPTIONS",
    "PAGE",
    "GrdmaCache",
    "GrdmaComponent",
    "GrdmaModule",
    "IntervalTree",
    "page_range",
]

# The module and its index with the first query (registering, as pmca info does,
# needs neither); the cache with the first one created (GrdmaModule.create).
_TARGETS = {
    "OPTIONS": "._module:OPTIONS",
    "GrdmaModule": "._module:GrdmaModule",
    "IntervalTree": "._tree:IntervalTree",
    "PAGE": "._cache:PAGE",
    "GrdmaCache": "._cache:GrdmaCache",
    "page_range": "._cache:page_range",
}
if not TYPE_CHECKING:  # mypy sees the imports above, and no catch-all
    __getattr__, __dir__ = lazy_attributes(__name__, _TARGETS)
