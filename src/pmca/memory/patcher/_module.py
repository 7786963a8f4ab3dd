"""The memory module of memory/patcher."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from ..._forksafe import short_lock
from ..._public import public
from .._interface import Support
from .._pvars import emit_overwrite, support_source
from .._sources import UcmDelivery, describe_failures, support_from

if TYPE_CHECKING:
    from structlog.typing import FilteringBoundLogger

    from ...mca._open import OpenFramework
    from ...mca.params import Param
    from ...native import Overwrite

#: The release paths memory/patcher intercepts, in patch order.
SYMBOLS = ("munmap", "madvise", "mremap", "brk", "shmdt", "mmap")
OWNER = "memory/patcher"


@public
class PatcherMemory:
    """Installs the hooks through the selected patcher; measures what they catch.

    Holds the open patcher framework (one reference, taken by the component's
    query and dropped by its close), never a patcher module across opens.
    """

    def __init__(
        self, patcher: OpenFramework, log: FilteringBoundLogger, ring_size: Param | None = None
    ) -> None:
        self._patcher = patcher
        self._ring_size = ring_size
        self._log = log
        self._support = Support.NONE
        self._installed = False
        self.refused: dict[str, str] = {}
        self.self_test: dict[str, bool] = {}
        self._install_lock = short_lock()
        self._ucm = UcmDelivery(log)
        self._stop_watching: Callable[[], None] | None = None
        support_source("patcher", self)

    @property
    def support_now(self) -> int:
        """The support level without checking for overwrites (the pvar's cheap read)."""
        return int(self._support)

    def support_level(self) -> Support:
        """What is caught now: an overwritten patch is noticed here, not only at a drain."""
        if self._installed:
            from ... import native

            native.check_overwrites(wait=True)
        return self._support

    @property
    def source(self) -> str:
        """What delivers the events: ``"own patches"``, ``"ucm"`` or ``"none"``."""
        if self._ucm.active:
            return "ucm"
        return "own patches" if self._support else "none"

    def _configure_ring(self) -> None:
        """Allocate the ring at the configured size before the first hook can fire."""
        from ... import native

        if self._ring_size is None:
            return
        wanted = int(self._ring_size.value)
        actual = native.backend().configure_ring(wanted)
        if actual != wanted:
            self._log.warning(
                "release-event ring already allocated; size parameter not applied",
                param=self._ring_size.full_name,
                wanted=wanted,
                actual=actual,
            )

    def installed(self) -> bool:
        return self._installed

    def install(self, reason: str) -> Support:
        with self._install_lock:  # two first register_release() calls race here
            if self._installed:
                return self._support
            return self._install(reason)

    def _install(self, reason: str) -> Support:
        from ... import native
        from ...patcher import PatcherModule
        from .._base import MemoryHooksUnavailable

        patcher = self._patcher.module()
        assert isinstance(patcher, PatcherModule)
        self._configure_ring()
        for symbol in SYMBOLS:
            try:
                patcher.patch_symbol(symbol, owner=OWNER)
            except native.PatchRefused as refused:
                holder = native.foreign_patches(native.backend(), (symbol,)).get(symbol)
                owner = f" (patched by {holder.owner})" if holder else ""
                self.refused[symbol] = f"{refused}{owner}"
                self._log.warning("cannot hook", symbol=symbol, reason=self.refused[symbol])
        hooked = [s for s in SYMBOLS if s not in self.refused]
        self.self_test = native.self_test(hooked) if hooked else {}
        support = support_from(self.self_test)
        if not support:
            # Patches that did go in stay until the patcher framework closes
            # (it restores them all); a later call tries again.
            foreign = native.foreign_patches(native.backend(), tuple(self.refused))
            hint = (
                "; memory=ucm subscribes to UCX's events instead"
                if any(patch.is_ucm for patch in foreign.values())
                else ""
            )
            raise MemoryHooksUnavailable(
                f"memory hooks could not be installed ({reason}): "
                + describe_failures(self.refused, self.self_test)
                + hint
            )
        self._support = support
        self._installed = True
        self._stop_watching = native.on_overwrite(self._overwritten)
        self._log.info(
            "memory hooks installed",
            reason=reason,
            support=repr(support),
            self_test=self.self_test,
        )
        return support

    def _overwritten(self, overwrite: Overwrite) -> None:
        """Someone wrote over our patches: say so once, then use ucm if it is there."""
        from ... import native

        lost = [s for s in overwrite.symbols if self.self_test.get(s)]
        if not lost and not (overwrite.guarded_changed and self._ucm.active):
            return
        emit_overwrite("patcher", overwrite.symbols, overwrite.foreign)
        self._log.error(
            "memory hooks overwritten; every registration is treated as invalid",
            what=overwrite.describe(),
        )
        if self._ucm.active:
            self._support = self._ucm.retest("ucm's hooks changed")
            return
        for symbol in lost:
            self.self_test[symbol] = False
        self._support = support_from(self.self_test)
        if native.ucm_source().status().loaded:
            try:
                self._support = self._ucm.start("pmca's own patches were overwritten")
            except Exception as why:  # keep what is left; say why ucm did not help
                self._log.error("cannot switch to UCX's ucm", why=str(why))
        self._log.error(
            "memory hooks now",
            source=self.source,
            support=repr(self._support),
        )

    def close(self) -> None:
        """Stop watching and unsubscribe from ucm; the patcher framework restores patches."""
        stop, self._stop_watching = self._stop_watching, None
        if stop is not None:
            stop()
        self._ucm.stop()
