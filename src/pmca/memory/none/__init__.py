"""memory/none: no hooks at all, for machines (or runs) that cannot or must not patch."""

from __future__ import annotations

from ..._version import __version__
from ...mca import Component, ComponentContext, Query, hookimpl
from .._base import MemoryHooksUnavailable
from .._interface import Support


class NoHooks:
    """A memory module that catches nothing."""

    def support_level(self) -> Support:
        return Support.NONE

    def installed(self) -> bool:
        return False

    def install(self, reason: str) -> Support:
        raise MemoryHooksUnavailable(
            f"memory hooks were needed ({reason}) but the 'none' memory component is selected"
        )


class NoneMemoryComponent(Component):
    framework = "memory"
    name = "none"
    version = __version__
    api_version = "1.0.0"

    @hookimpl
    def query(self, ctx: ComponentContext) -> Query:
        return Query(priority=0, module=NoHooks())
