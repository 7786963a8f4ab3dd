"""The patcher framework: prologue patching of libc functions, byte-exact restore."""

from __future__ import annotations

from ._framework import FRAMEWORK, PatcherBase
from ._interface import EMPTY_PATCHER, EmptyPatcher, PatcherModule, PatchRecord, RestoreOutcome


def current() -> PatcherModule:
    """The selected patcher module, or the empty module when none is open."""
    from ..runtime import RUNTIME

    state = RUNTIME.frameworks.get(FRAMEWORK.name)
    modules = state.modules if state is not None else []
    module = modules[0] if modules else None
    return module if isinstance(module, PatcherModule) else EMPTY_PATCHER


def restore_all() -> list[RestoreOutcome]:
    """Restore every live patch of the selected patcher module."""
    return current().restore_all()


__all__ = [
    "EMPTY_PATCHER",
    "FRAMEWORK",
    "EmptyPatcher",
    "PatchRecord",
    "PatcherBase",
    "PatcherModule",
    "RestoreOutcome",
    "current",
    "restore_all",
]
