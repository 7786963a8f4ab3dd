"""The memory module of memory/patcher."""

from __future__ import annotations

import threading
from typing import TYPE_CHECKING

from .._interface import Support

if TYPE_CHECKING:
    from structlog.typing import FilteringBoundLogger

    from ...mca._open import OpenFramework
    from ...mca.params import Param

#: The release paths memory/patcher intercepts, in patch order.
SYMBOLS = ("munmap", "madvise", "mremap", "brk", "shmdt", "mmap")
OWNER = "memory/patcher"
#: The native ring's default size (pmca_hooks_default_ring_capacity()).
DEFAULT_RING_CAPACITY = 1 << 18
_RING_LIMITS = (1 << 10, 1 << 26)


def check_ring_capacity(param: Param) -> None:
    """Reject a ring size the native ring cannot have, naming the parameter."""
    from ...mca.params import ParamValueError

    value = int(param.value)
    low, high = _RING_LIMITS
    if not low <= value <= high or value & (value - 1):
        raise ParamValueError(
            param.full_name,
            value,
            param.origin,
            f"a power of two from {low} to {high}",
            "the release-event ring needs a power-of-two number of slots",
        )


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
        self._install_lock = threading.Lock()

    def support_level(self) -> Support:
        return self._support

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
                self.refused[symbol] = str(refused)
                self._log.warning("cannot hook", symbol=symbol, reason=str(refused))
        hooked = [s for s in SYMBOLS if s not in self.refused]
        self.self_test = native.self_test(hooked) if hooked else {}
        # Open MPI's rule: FREE needs what allocators release through
        # (munmap, madvise, mremap, brk); MUNMAP needs a direct munmap.
        support = Support.NONE
        if self.self_test.get("munmap"):
            support |= Support.MUNMAP
            if all(self.self_test.get(s) for s in ("madvise", "mremap", "brk")):
                support |= Support.FREE
        if not support:
            # Patches that did go in stay until the patcher framework closes
            # (it restores them all); a later call tries again.
            raise MemoryHooksUnavailable(
                f"memory hooks could not be installed ({reason}): "
                + "; ".join(
                    [f"{s}: {why}" for s, why in self.refused.items()]
                    + [f"{s}: self-test saw no event" for s, ok in self.self_test.items() if not ok]
                )
            )
        self._support = support
        self._installed = True
        self._log.info(
            "memory hooks installed",
            reason=reason,
            support=repr(support),
            self_test=self.self_test,
        )
        return support
