"""The memory framework's module interface and support levels."""

from __future__ import annotations

import enum
from typing import Protocol, runtime_checkable

from .._public import public


@public
class Support(enum.IntFlag):
    """What the memory hooks catch (Open MPI's ``OPAL_MEMORY_*_SUPPORT``)."""

    NONE = 0
    #: A callback fires on any release, from an allocator or munmap.
    FREE = 0x1
    #: A callback fires when the user calls munmap directly.
    MUNMAP = 0x2
    #: A callback fires only when memory goes back to the operating system.
    CHUNK = 0x4


@public
@runtime_checkable
class MemoryModule(Protocol):
    """What a selected memory module does."""

    def support_level(self) -> Support:
        """What release paths are caught now (nothing until hooks are installed)."""
        ...

    def installed(self) -> bool:
        """Whether the release hooks are in place."""
        ...

    def install(self, reason: str) -> Support:
        """Install the release hooks now (idempotent) and return the support level."""
        ...
