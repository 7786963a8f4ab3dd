"""Base logic of the memory framework: hook activation and release callbacks."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from .._public import public
from ..mca._context import FrameworkParams
from ..mca._errors import PmcaError
from ..mca._framework import FrameworkBase
from ..mca._open import OpenFramework
from ._activation import Decision, decide, setting
from ._interface import MemoryModule, Support

if TYPE_CHECKING:
    from ..native import ReleaseBatch

ReleaseCallback = Callable[[int, int, str, bool], object]
BatchCallback = Callable[["ReleaseBatch"], object]


@public
class MemoryHooksUnavailable(PmcaError):
    """Release callbacks were asked for where no memory hooks can be installed."""


@public
class ReleaseHandle:
    """Returned by ``register_release``; ``unregister()`` is idempotent."""

    def __init__(self, callback: Callable[..., Any], unsubscribe: Callable[[], None]) -> None:
        self.callback = callback
        self._unsubscribe: Callable[[], None] | None = unsubscribe

    @property
    def active(self) -> bool:
        return self._unsubscribe is not None

    def unregister(self) -> None:
        from .._interrupts import deferred_interrupts

        with deferred_interrupts():  # never a handle gone with its subscription left
            unsubscribe, self._unsubscribe = self._unsubscribe, None
            if unsubscribe is not None:
                unsubscribe()


class MemoryBase(FrameworkBase):
    """Decides when hooks go in and owns the release callbacks of this open."""

    def __init__(self, framework: OpenFramework) -> None:
        super().__init__(framework)
        self.decision: Decision = "runtime"
        self.handles: list[ReleaseHandle] = []

    def register_params(self, params: FrameworkParams) -> None:
        from ..mca.params import AUTO_BOOL

        space = self.framework.host.params
        for name, help_text in (
            (
                "leave_pinned",
                "Whether to use the 'leave pinned' protocol: keep memory registered "
                "(true), never (false), or decide at run time (auto)",
            ),
            (
                "leave_pinned_pipeline",
                "Whether to use the 'leave pinned pipeline' protocol (true/false/auto)",
            ),
        ):
            space.register(
                "mpi",
                None,
                name,
                type=int,
                enumeration=AUTO_BOOL,
                default=-1,
                help=help_text,
                level=9,
                group="memory_base",
                # Open MPI 5 moved these from opal_* and kept the old names.
                deprecated_synonyms=(f"opal_{name}",),
            )

    def _setting(self, name: str) -> str:
        from ..mca.params import Source

        param = self.framework.host.params.get(name)
        return setting(int(param.value), explicitly_set=param.origin.source is not Source.DEFAULT)

    @property
    def module(self) -> MemoryModule | None:
        modules = self.framework.modules()
        return modules[0] if modules and isinstance(modules[0], MemoryModule) else None

    def opened(self) -> None:
        rules = getattr(self.module, "activation_rules", "seed")
        self.decision = decide(
            self._setting("mpi_leave_pinned"),  # type: ignore[arg-type]
            self._setting("mpi_leave_pinned_pipeline"),  # type: ignore[arg-type]
            rules="ompi-5" if rules == "ompi-5" else "seed",
        )
        self.framework.log.debug("hook activation decided", cell=self.decision, rules=rules)
        if self.decision == "yes":
            self._install("the mpi_leave_pinned matrix cell is 'yes'")

    def peer_opened(self, peer: OpenFramework) -> None:
        if self.decision != "runtime" or self.module is None or self.module.installed():
            return
        for loaded in peer.selected:
            if loaded.component.needs_registration:
                self._install(
                    f"selected component {peer.name}/{loaded.component.name} needs registration"
                )
                return

    def _install(self, reason: str) -> None:
        """Install for a framework open; never fail the open (Open MPI warns instead)."""
        module = self.module
        if module is None:
            return
        try:
            module.install(reason)
        except MemoryHooksUnavailable as why:
            self.framework.log.error(
                "memory hooks needed but unavailable; registration caching will not be coherent",
                reason=reason,
                why=f"{why}{self._unavailable_reasons()}",
            )

    def _unavailable_reasons(self) -> str:
        reasons = self.framework.not_available
        if not reasons:
            return ""
        return " (" + "; ".join(f"{name}: {why}" for name, why in reasons.items()) + ")"

    def support_level(self) -> Support:
        return self.module.support_level() if self.module is not None else Support.NONE

    def activate_for_release(self) -> Support:
        """Install the hooks for a first release callback, if the matrix allows it."""
        module = self.module
        odd = [lc for lc in self.framework.selected if not isinstance(lc.module, MemoryModule)]
        if module is None and odd:
            chosen = odd[0]
            raise MemoryHooksUnavailable(
                f"the selected memory component {chosen.candidate.name!r} from "
                f"{chosen.candidate.location} returned {repr(chosen.module)[:80]} "
                f"({type(chosen.module).__name__}) from its query, not a memory module; "
                "release callbacks cannot be delivered"
            )
        if module is None:
            raise MemoryHooksUnavailable(
                "no memory component is selected (memory framework selection: "
                f"{self.framework.host.params.value('memory')!r}); release callbacks "
                "cannot be delivered"
            )
        if self.decision == "no":
            raise MemoryHooksUnavailable(
                "memory hooks are disabled by mpi_leave_pinned="
                f"{self._setting('mpi_leave_pinned')} and mpi_leave_pinned_pipeline="
                f"{self._setting('mpi_leave_pinned_pipeline')} (the 'no' cell of the matrix)"
            )
        if not module.installed():
            try:
                module.install("first register_release()")
            except MemoryHooksUnavailable as why:
                raise MemoryHooksUnavailable(f"{why}{self._unavailable_reasons()}") from None
        return module.support_level()

    def closing(self) -> None:
        # Open MPI's opal_mem_hooks_finalize: stop delivering before the
        # hooks are restored, so no callback sees a half-closed framework.
        # Each unregister() first delivers what was released until now.
        handles, self.handles = self.handles, []
        for handle in reversed(handles):
            handle.unregister()
