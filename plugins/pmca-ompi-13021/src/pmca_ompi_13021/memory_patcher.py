"""Open MPI 5.0.6's memory/patcher component, faithfully, over pmca's real hooks.

Source: ``opal/mca/memory/patcher/memory_patcher_component.c`` as released in
5.0.6, before 860bbd6a11 ("patcher: make it work better with sessions
model"). Its state lives at module level, as the C file's ``static``
variables did, and this component is forced static, so that state survives
every session in the process:

- ``was_executed_already``: the one-shot guard of ``patcher_open``, reset
  only on a patching error;
- ``patcher_base.opal_patcher``: the selected patcher module, never reset;
- ``memoryhooks.hooks_support``: the support level, never cleared.

How Open MPI's lifecycle maps onto pmca's
-----------------------------------------
Open MPI's memory base *queries* every component (``patcher_query`` opens the
patcher framework), keeps the best, unloads the others and only then *opens*
the winner: ``patcher_open`` (guard, select, support, patch) runs for the
selected component alone. pmca opens every admitted component before it
queries them, and has no "you were selected" hook. So:

- Open MPI's query is this component's ``query``: it opens the patcher
  framework and offers a module. It never patches nor touches a global.
- Open MPI's open of the winner happens when something opens the memory
  framework for registration (``rcache_base_create.c:65``, btl/ofi's memory
  monitor export); here it is the first ``install()`` of this component's
  module, which pmca's memory base calls when something needs hooks: a
  selected component that needs registration (btl ``ofi``), a first
  ``register_release()``, or framework open when ``mpi_leave_pinned`` says
  so, following Open MPI 5.x's cells (``activation_rules = "ompi-5"``).
  Only a selected module is ever installed, so a component that loses
  selection leaves no trace: no patch, no guard, no global.
- Open MPI's close chain (``patcher_close`` → ``mca_base_framework_close``
  → ``opal_patcher_base_close`` → ``opal_patcher_base_restore_all``) is
  this component's ``close``. In Open MPI memory/patcher is the patcher
  framework's only user, so its close is the framework's real close; in pmca
  a session may hold the patcher framework too, so the chain runs here, where
  it ran in Open MPI, and pmca's own patcher base close follows later.

What that does (``sessions_init_twice``)
----------------------------------------
Session 1 selects ``patcher/overwrite`` into ``opal_patcher``, patches and
claims FREE|MUNMAP; its close restores through ``opal_patcher``. Session 2
finds the guard set: no select, no patches, while ``support_level()`` still
claims FREE|MUNMAP. Its close restores through ``opal_patcher`` again, which
still points at session 1's overwrite module:

- ``mca_base_component_dso=all``: the raw half of the pointer leads into a
  library pmca has ``dlclose``d: quarantined (faults at the first read), or,
  without the quarantine, reloaded at the same address with its base part
  never constructed (the list walk follows a NULL link) or reloaded
  elsewhere (the old range unmapped: faults at the first read). Either way: SIGSEGV in
  ``opal_patcher_base_restore_all``, the crash of open-mpi/ompi#13021;
- static: the library is still resident, nothing crashes, and session 2 ran
  silently without memory hooks.

pmca's stale-reference check names the Python half of the pointer at
session 1's finalize; at its default (error) the run stops there.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from pmca import Component, ComponentContext, FrameworkError, NotAvailable, Query, hookimpl
from pmca.memory import MemoryHooksUnavailable, Support
from pmca.native import PatchRefused

from . import patcher_base
from .memoryhooks import opal_mem_hooks_set_support, opal_mem_hooks_support_level
from .patcher_base import (
    opal_patcher_base_close,
    opal_patcher_base_restore_all,
    opal_patcher_base_select,
    opal_patcher_patch_symbol,
)

if TYPE_CHECKING:
    from structlog.typing import FilteringBoundLogger

    from pmca.mca import ComponentParams, OpenFramework

#: What 5.0.6 patches, in its order (memory_patcher_component.c:606-658; shmat
#: is left out: pmca's backend has no shmat hook, and 5.0.6 itself only
#: reports SHM_REMAP through it).
SYMBOLS = ("mmap", "munmap", "mremap", "madvise", "shmdt", "brk")
OWNER = "memory/ompi13021"

#: ``static int was_executed_already`` of ``patcher_open`` (memory_patcher_component.c:588):
#: reset only on a patching error, never at close.
was_executed_already = False


def patcher_open(
    patcher: OpenFramework, close_patcher: Callable[[], None], log: FilteringBoundLogger
) -> None:
    """5.0.6's ``patcher_open``: guard, select into the global, claim support, patch."""
    global was_executed_already
    # memory_patcher_component.c:591-595: the one-shot guard.
    if was_executed_already:
        log.info("patcher_open already ran in this process: no select, no patches")
        return
    was_executed_already = True
    # :597-601: a failed select closes the patcher framework; "not available".
    try:
        opal_patcher_base_select(patcher)
    except (FrameworkError, TypeError) as exc:
        close_patcher()
        raise MemoryHooksUnavailable(f"opal_patcher_base_select failed: {exc}") from exc
    # :604: the support level is claimed before anything is patched.
    opal_mem_hooks_set_support(Support.FREE | Support.MUNMAP)
    for symbol in SYMBOLS:
        try:
            opal_patcher_patch_symbol(symbol, owner=OWNER)
        except PatchRefused as refused:
            # :668-674 (err_patching): reset the guard so that a later open
            # tries again, restore what was patched; the support claim stays.
            was_executed_already = False
            opal_patcher_base_restore_all()
            raise MemoryHooksUnavailable(f"patcher_open: {refused}") from refused
    log.info(
        "memory hooks installed",
        symbols=list(SYMBOLS),
        patcher=type(patcher_base.opal_patcher).__name__,
    )


def patcher_close(ctx: ComponentContext) -> None:
    """5.0.6's ``patcher_close`` (memory_patcher_component.c:677-684): close the
    patcher framework; the guard stays set."""
    # mca_base_framework_close(&opal_patcher_base_framework) runs the
    # framework's close function, opal_patcher_base_close(), first.
    opal_patcher_base_close()
    ctx.close_framework("patcher")


class Ompi13021Memory:
    """The memory module: hooks come from ``patcher_open``, support from the global."""

    #: When the memory base installs this module: Open MPI 5.x's rules
    #: (rcache_base_create.c:60), not the ptmalloc2-era matrix pmca follows.
    activation_rules = "ompi-5"

    def __init__(
        self, patcher: OpenFramework, close_patcher: Callable[[], None], log: FilteringBoundLogger
    ) -> None:
        self._patcher = patcher
        self._close_patcher = close_patcher
        self._log = log
        self._installed = False

    def support_level(self) -> Support:
        return opal_mem_hooks_support_level()

    def installed(self) -> bool:
        return self._installed

    def install(self, reason: str) -> Support:
        if not self._installed:
            self._log.debug("memory framework opened for hooks", reason=reason)
            self._installed = True
            patcher_open(self._patcher, self._close_patcher, self._log)
        return opal_mem_hooks_support_level()


def _named_in_selection(ctx: ComponentContext) -> bool:
    """Whether the ``memory`` selection parameter explicitly includes this component."""
    value = str(ctx.host.params.value("memory") or "").strip()
    if value.startswith("^"):
        return False
    return Ompi13021MemoryComponent.name in {item.strip() for item in value.split(",")}


class Ompi13021MemoryComponent(Component):
    """memory/patcher as Open MPI 5.0.6 shipped it; select with ``memory=ompi13021``."""

    framework = "memory"
    name = "ompi13021"
    #: The Open MPI release whose behaviour this component reproduces.
    version = "5.0.6"
    api_version = "1.0.0"
    force_static = True  # as memory/patcher is in Open MPI: its statics outlive sessions

    def __init__(self) -> None:
        self._patcher_open = False

    @hookimpl
    def register(self, params: ComponentParams) -> None:
        params.register(
            "priority",
            type=int,
            default=5,
            level=5,
            help="Priority of the Open MPI 5.0.6 memory/patcher reproduction (low, so that "
            "pmca's own memory/patcher wins whenever both are selectable)",
        )

    @hookimpl
    def open(self, ctx: ComponentContext) -> None:
        from pmca import native

        if not native.available():
            raise NotAvailable(native.unavailable_reason() or "native backend unavailable")

    @hookimpl
    def query(self, ctx: ComponentContext) -> Query | None:
        # A reproduction of a crash is never picked by accident, not even by
        # an exclusion list such as memory=^patcher.
        if not _named_in_selection(ctx):
            ctx.log.debug("not named in the memory selection; declining")
            return None
        # patcher_query: open the patcher framework (Open MPI: priority -1 if
        # that fails). No select, no patch: that is patcher_open's work.
        patcher = ctx.open_framework("patcher")
        self._patcher_open = True
        if not patcher.modules():
            ctx.log.info("no patcher module selected; declining")
            return None
        module = Ompi13021Memory(patcher, lambda: self._close_patcher(ctx), ctx.log)
        return Query(priority=int(ctx.params["priority"]), module=module)

    def _close_patcher(self, ctx: ComponentContext) -> None:
        if self._patcher_open:
            self._patcher_open = False
            ctx.close_framework("patcher")

    @hookimpl
    def close(self, ctx: ComponentContext) -> None:
        if self._patcher_open:
            self._patcher_open = False
            patcher_close(ctx)


__all__ = [
    "OWNER",
    "SYMBOLS",
    "Ompi13021Memory",
    "Ompi13021MemoryComponent",
    "patcher_close",
    "patcher_open",
]
