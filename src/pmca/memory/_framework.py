"""Declaration of the memory framework."""

from __future__ import annotations

from ..mca._framework import ComponentRef, Framework
from ._base import MemoryBase

FRAMEWORK = Framework(
    name="memory",
    description="memory release hooks for registration caches",
    api_version="1.0.0",
    policy="single",
    static_components=[
        ComponentRef("patcher", "pmca.memory.patcher:PatcherMemoryComponent", force_static=True),
        ComponentRef("ucm", "pmca.memory.ucm:UcmMemoryComponent"),
        ComponentRef("none", "pmca.memory.none:NoneMemoryComponent"),
    ],
    base=MemoryBase,
)
