"""patcher/overwrite: in-place prologue patching through pmca's native backend.

The patch bookkeeping lives in this component's own native library, loaded
through pmca's loader: in ``dso`` mode it is really unloaded at the last
close, and the loader refuses to ``dlclose`` it while it still records live
patches (it restores them first and says so).
"""

from __future__ import annotations

from ..._lazy import lazy_attributes
from ..._version import __version__
from ...mca import Component, ComponentContext, NotAvailable, Query, hookimpl
from ...mca._context import ComponentParams
from ...mca._pvars import REGISTRY, PVarClass, PVarFlag, PVarGroup
from ._counts import COUNTS, counted

TYPE_CHECKING = False  # typing.TYPE_CHECKING, without importing typing for it
if TYPE_CHECKING:
    from ._module import OverwriteModule

#: The four counts in COUNTS' order, read at once by a sweep.
_COUNTS = PVarGroup(lambda _obj: list(COUNTS.values()))

for _name, _key, _description in (
    ("patches_installed", "installed", "Patches of libc functions installed"),
    ("patches_restored", "restored", "Patches restored to the original bytes"),
    (
        "patches_not_ours",
        "not_ours",
        "Restores that found another library's bytes (left in pass-through)",
    ),
    (
        "foreign_patches_seen",
        "foreign",
        "Patches refused because the function's entry already jumped to another "
        "library's hook (UCX's ucm, Open MPI's patcher, libfabric's memhooks)",
    ),
):
    REGISTRY.register(
        "patcher",
        "overwrite",
        _name,
        PVarClass.COUNTER,
        counted(_key),
        group=_COUNTS.field(list(COUNTS).index(_key)),
        unit="patches",
        level=4,
        flags=PVarFlag.CONTINUOUS,
        description=_description,
    )


class OverwriteComponent(Component):
    framework = "patcher"
    name = "overwrite"
    version = __version__
    api_version = "1.0.0"

    @hookimpl
    def register(self, params: ComponentParams) -> None:
        params.register(
            "priority",
            type=int,
            default=37,
            level=5,
            help="Priority of the overwrite patcher component",
        )

    @hookimpl
    def open(self, ctx: ComponentContext) -> None:
        from ... import native

        if not native.available():
            raise NotAvailable(native.unavailable_reason() or "native backend unavailable")

    @hookimpl
    def query(self, ctx: ComponentContext) -> Query:
        from ... import native
        from ._module import OverwriteModule
        from ._table import LIBRARY_FILE, PatchTable

        holder: list[OverwriteModule] = []
        dlclosed = ctx.load_mode == "dso"
        library = ctx.load_library(
            LIBRARY_FILE, before_unload=lambda: _restore_left(holder, dlclosed=dlclosed)
        )
        module = OverwriteModule(PatchTable(library.cdll), native.backend(), ctx.log)
        holder.append(module)
        return Query(priority=int(ctx.params["priority"]), module=module)


def _restore_left(holder: list[OverwriteModule], *, dlclosed: bool) -> str | None:
    """The loader's unload guard: no component unloads with live patches."""
    module = holder.pop() if holder else None
    if module is None or not module.patches():
        return None
    from ._table import LIBRARY_NAME  # imported by the query that made the module

    outcomes = module.restore_all()
    symbols = ", ".join(outcome.record.symbol for outcome in outcomes)
    what = f"refused to dlclose {LIBRARY_NAME}" if dlclosed else "unloading patcher/overwrite"
    return f"{what} while it owned {len(outcomes)} live patch(es) ({symbols}): restored them first"


__all__ = ["OverwriteComponent", "OverwriteModule"]

# The module and its table with the first query: registering (pmca info) needs neither.
_TARGETS = {"OverwriteModule": "._module:OverwriteModule"}

if not TYPE_CHECKING:  # mypy sees the imports above, and no catch-all
    __getattr__, __dir__ = lazy_attributes(__name__, _TARGETS)
