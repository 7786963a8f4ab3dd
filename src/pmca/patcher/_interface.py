"""The patcher framework's module interface."""

from __future__ import annotations

from typing import TYPE_CHECKING, Protocol, runtime_checkable

from .._public import public

if TYPE_CHECKING:
    from ._patches import PatchRecord, RestoreOutcome


@public
@runtime_checkable
class PatcherModule(Protocol):
    """What a selected patcher module does (Open MPI's ``mca_patcher_base_module_t``)."""

    def patch_symbol(self, symbol: str, *, owner: str) -> PatchRecord:
        """Make libc's ``symbol`` jump to pmca's hook for it; record the owner."""
        ...

    def patches(self) -> list[PatchRecord]:
        """Live patches, in the order they were applied."""
        ...

    def restore_all(self) -> list[RestoreOutcome]:
        """Restore every live patch, last applied first, byte-exact."""
        ...


@public
class EmptyPatcher:
    """The patcher module when no patcher framework is open: patches nothing."""

    def patch_symbol(self, symbol: str, *, owner: str) -> PatchRecord:
        from ..mca._errors import FrameworkError

        raise FrameworkError(
            f"{owner} asked to patch {symbol!r}, but no patcher module is selected "
            f"(is the patcher framework open?)"
        )

    def patches(self) -> list[PatchRecord]:
        return []

    def restore_all(self) -> list[RestoreOutcome]:
        return []


EMPTY_PATCHER = EmptyPatcher()
