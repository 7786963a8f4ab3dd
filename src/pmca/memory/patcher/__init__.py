"""memory/patcher: release hooks by patching libc through the patcher framework.

Forced static, as in Open MPI. Unlike Open MPI 5.0.6 it keeps no state at
module level: the patcher module it uses, the patches and the support level
belong to the module object of one framework open, so every session
reselects the patcher and repatches, and nothing survives a close (the fix of
open-mpi/ompi#13021, and then some).
"""

from __future__ import annotations

from ..._lazy import lazy_attributes
from ..._version import __version__
from ...mca import Component, ComponentContext, NotAvailable, Query, hookimpl
from ...mca._context import ComponentParams
from ...mca.params import power_of_two
from .._pvars import register_delivery_pvars, register_events, register_support_pvar

TYPE_CHECKING = False  # typing.TYPE_CHECKING, without importing typing for it
if TYPE_CHECKING:
    from ._module import PatcherMemory

#: The native ring's default size (pmca_hooks_default_ring_capacity()).
DEFAULT_RING_CAPACITY = 1 << 18
#: The sizes the native ring accepts (a power of two between them).
RING_LIMITS = (1 << 10, 1 << 26)

register_delivery_pvars("patcher")
register_support_pvar("patcher")
register_events(
    "patcher",
    overwritten="Another library overwrote pmca's patches of these symbols (symbols; foreign: "
    "who holds each release function now)",
)


class PatcherMemoryComponent(Component):
    framework = "memory"
    name = "patcher"
    version = __version__
    api_version = "1.0.0"
    force_static = True

    def __init__(self) -> None:
        self._patcher_open = False
        self._module: PatcherMemory | None = None

    @hookimpl
    def register(self, params: ComponentParams) -> None:
        params.register(
            "priority",
            type=int,
            default=80,
            level=5,
            help="Priority of the patcher memory hook component",
        )
        params.register(
            "disable",
            type=bool,
            default=False,
            level=4,
            help="Never install memory hooks (like Open MPI's memory_ptmalloc2_disable); "
            "usually given as PMCA_MCA_memory_patcher_disable=1",
        )
        params.register(
            "ring_size",
            type=int,
            default=DEFAULT_RING_CAPACITY,
            level=6,
            help="Slots (32 bytes each) of the release-event ring, a power of two from "
            "1024 to 67108864; read when the ring is first allocated, which happens "
            "once per process",
            **power_of_two(*RING_LIMITS),
        )

    @hookimpl
    def open(self, ctx: ComponentContext) -> None:
        from ... import native

        if ctx.params["disable"]:
            param = ctx.params.param("disable")
            raise NotAvailable(f"memory hooks disabled by {param.full_name} ({param.origin})")
        if not native.available():
            raise NotAvailable(native.unavailable_reason() or "native backend unavailable")

    @hookimpl
    def query(self, ctx: ComponentContext) -> Query | None:
        from ._module import PatcherMemory

        patcher = ctx.open_framework("patcher")
        self._patcher_open = True
        if not patcher.modules():
            ctx.log.info("no patcher module selected; declining")
            return None
        self._module = PatcherMemory(patcher, ctx.log, ring_size=ctx.params.param("ring_size"))
        return Query(priority=int(ctx.params["priority"]), module=self._module)

    @hookimpl
    def close(self, ctx: ComponentContext) -> None:
        module, self._module = self._module, None
        if module is not None:
            module.close()
        # The patcher framework restores every patch at its last close.
        if self._patcher_open:
            self._patcher_open = False
            ctx.close_framework("patcher")


__all__ = ["DEFAULT_RING_CAPACITY", "PatcherMemory", "PatcherMemoryComponent"]

# The module with the first query: registering (pmca info) does not need it.
_TARGETS = {"PatcherMemory": "._module:PatcherMemory"}

if not TYPE_CHECKING:  # mypy sees the imports above, and no catch-all
    __getattr__, __dir__ = lazy_attributes(__name__, _TARGETS)
