"""The patcher framework: prologue patching of libc functions, byte-exact restore."""

from __future__ import annotations

from .._lazy import lazy_attributes
from ._framework import FRAMEWORK, PatcherBase
from ._interface import EMPTY_PATCHER, EmptyPatcher, PatcherModule

TYPE_CHECKING = False  # typing.TYPE_CHECKING, without importing typing for it
if TYPE_CHECKING:
    from ._patches import PatchRecord, RestoreOutcome


def current() -> PatcherModule:
    """The selected patcher module, or the empty module when none is open."""
    from ..runtime import RUNTIME

    state = RUNTIME.frameworks.get(FRAMEWORK.name)
    modules = state.modules() if state is not None else []
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

# Built with the first patch: a session that installs no hook never needs them.
_TARGETS = {name: f"._patches:{name}" for name in ("PatchRecord", "RestoreOutcome")}
if not TYPE_CHECKING:  # mypy sees the imports above, and no catch-all
    __getattr__, __dir__ = lazy_attributes(__name__, _TARGETS)
