"""btl/self: messages a process sends to itself (highest exclusivity)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..._lazy import lazy_attributes
from ..._version import __version__
from ...mca import Component, ComponentContext, ComponentParams, Query, hookimpl
from .._limits import Flags, Limits
from ..base import read_limits, register_limits

if TYPE_CHECKING:
    from ._module import SelfModule

DEFAULTS = Limits(
    exclusivity=65536,  # MCA_BTL_EXCLUSIVITY_HIGH
    latency=0,
    bandwidth=100_000,
    eager_limit=64 * 1024,
    rndv_eager_limit=64 * 1024,
    max_send_size=256 * 1024,
    flags=Flags.SEND | Flags.RDMA | Flags.SINGLE_COPY,
    put_limit=1 << 62,
    get_limit=1 << 62,
)


class SelfComponent(Component):
    framework = "btl"
    name = "self"
    version = __version__
    api_version = "1.0.0"

    @hookimpl
    def register(self, params: ComponentParams) -> None:
        register_limits(params, DEFAULTS)

    @hookimpl
    def query(self, ctx: ComponentContext) -> Query:
        from ._module import SelfModule

        limits = read_limits(ctx.params, DEFAULTS)
        return Query(priority=limits.exclusivity, module=SelfModule(limits, ctx.log))


if not TYPE_CHECKING:  # the module class, imported at first use
    __getattr__, __dir__ = lazy_attributes(__name__, {"SelfModule": "._module:SelfModule"})


__all__ = ["SelfComponent", "SelfModule"]
