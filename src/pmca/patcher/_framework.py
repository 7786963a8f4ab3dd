"""Declaration and base logic of the patcher framework."""

from __future__ import annotations

from .._public import public
from ..mca._framework import ComponentRef, Framework, FrameworkBase
from ._interface import PatcherModule


@public
class PatcherBase(FrameworkBase):
    """Restores every patch at the last close, before any component closes.

    This is Open MPI's ``opal_patcher_base_close``. The selected module is
    reached through the open framework, never through a global, so nothing
    can call into a patcher component after it is unloaded.
    """

    def closing(self) -> None:
        for module in self.framework.modules():
            if isinstance(module, PatcherModule):
                outcomes = module.restore_all()
                kept = [o.record.symbol for o in outcomes if not o.restored]
                self.framework.log.debug(
                    "patches restored", count=len(outcomes), left_in_pass_through=kept
                )


FRAMEWORK = Framework(
    name="patcher",
    description="runtime code patching of libc functions",
    api_version="1.0.0",
    policy="single",
    static_components=[ComponentRef("overwrite", "pmca.patcher.overwrite:OverwriteComponent")],
    base=PatcherBase,
)
