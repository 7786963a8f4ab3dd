"""btl/self: messages a process sends to itself (highest exclusivity)."""

from __future__ import annotations

from ..._version import __version__
from ...mca import Component, ComponentContext, ComponentParams, Query, hookimpl
from ..base import read_limits, register_limits
from ._module import DEFAULTS, SelfModule


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
        limits = read_limits(ctx.params, DEFAULTS)
        return Query(priority=limits.exclusivity, module=SelfModule(limits, ctx.log))


__all__ = ["SelfComponent", "SelfModule"]
