"""Declaration and base logic of the rcache framework."""

from __future__ import annotations

from .._public import public
from ..mca._framework import ComponentRef, Framework, FrameworkBase
from ._interface import RcacheModule


@public
class RcacheBase(FrameworkBase):
    """Closes every cache before any rcache component closes.

    A cache holds transport registrations and (for grdma) a native index in
    its component's library; both must be gone before that library can be
    unloaded.
    """

    def closing(self) -> None:
        for module in self.framework.modules():
            if isinstance(module, RcacheModule):
                module.close_all()


FRAMEWORK = Framework(
    name="rcache",
    description="registration caches for network transports",
    api_version="1.0.0",
    policy="multi",
    depends=("memory",),
    static_components=[ComponentRef("grdma", "pmca.rcache.grdma:GrdmaComponent")],
    base=RcacheBase,
)
