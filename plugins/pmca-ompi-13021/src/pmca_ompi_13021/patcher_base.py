"""Open MPI 5.0.6's patcher base globals (``opal/mca/patcher/base/patcher_base_frame.c``).

``opal_patcher`` is a process-wide pointer to the selected patcher module.
5.0.6 sets it at select and never resets it at close, so after the patcher
framework closes (and, with ``--enable-mca-dso``, its overwrite component is
``dlclose``d) it still points at the old module. pmca's own patcher framework
keeps no such global: it reaches its module through the open framework.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from pmca.patcher import EMPTY_PATCHER, PatcherModule, RestoreOutcome

if TYPE_CHECKING:
    from pmca.mca import OpenFramework

#: The selected patcher module; ``EMPTY_PATCHER`` is Open MPI's ``empty_module``.
opal_patcher: PatcherModule = EMPTY_PATCHER


def opal_patcher_base_select(patcher: OpenFramework) -> PatcherModule:
    """Take the patcher framework's selected module into the global."""
    global opal_patcher
    module = patcher.module()
    if not isinstance(module, PatcherModule):
        raise TypeError(f"patcher framework selected {module!r}, not a patcher module")
    opal_patcher = module
    return module


def opal_patcher_base_restore_all() -> list[RestoreOutcome]:
    """Restore every patch, through the global: where #13021 crashed."""
    if opal_patcher is EMPTY_PATCHER:
        return []
    return opal_patcher.restore_all()


def opal_patcher_base_close() -> list[RestoreOutcome]:
    """The patcher framework's close: restore all; ``opal_patcher`` is NOT reset (5.0.6)."""
    if opal_patcher is EMPTY_PATCHER:
        return []
    return opal_patcher_base_restore_all()
