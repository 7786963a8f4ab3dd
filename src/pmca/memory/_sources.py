"""What the memory modules share: the support rule and UCX's ucm as an event source."""

from __future__ import annotations

import threading
from collections.abc import Mapping
from typing import TYPE_CHECKING

from ._base import MemoryHooksUnavailable
from ._interface import Support

if TYPE_CHECKING:
    from structlog.typing import FilteringBoundLogger


def support_from(self_test: Mapping[str, bool]) -> Support:
    """Open MPI's rule: MUNMAP needs a direct munmap to be seen; FREE also needs
    what allocators release through (madvise, mremap, brk)."""
    support = Support.NONE
    if self_test.get("munmap"):
        support |= Support.MUNMAP
        if all(self_test.get(s) for s in ("madvise", "mremap", "brk")):
            support |= Support.FREE
    return support


def describe_failures(refused: Mapping[str, str], self_test: Mapping[str, bool]) -> str:
    return "; ".join(
        [f"{s}: {why}" for s, why in refused.items()]
        + [f"{s}: self-test saw no event" for s, ok in self_test.items() if not ok]
    )


class UcmDelivery:
    """Release events from UCX's ucm: one subscription, its self-test, its support level.

    ``start`` subscribes (loading UCX's libucs first when ``load`` is given and
    UCX is not loaded) and runs the same self-test as memory/patcher;
    ``stop`` unsubscribes.  Idempotent both ways.
    """

    def __init__(self, log: FilteringBoundLogger) -> None:
        self._log = log
        self._lock = threading.Lock()
        self.active = False
        self.path: str | None = None
        self.self_test: dict[str, bool] = {}

    def start(self, reason: str, *, load: str | None = None) -> Support:
        from .. import native

        with self._lock:
            if self.active:
                return support_from(self.self_test)
            source = native.ucm_source()
            try:
                if load is not None:
                    source.load(load)
                self.path = source.acquire()
            except native.NativeUnavailable as why:
                raise MemoryHooksUnavailable(
                    f"ucm cannot deliver events ({reason}): {why}"
                ) from None
            self.active = True
        return self.retest(reason)

    def retest(self, reason: str) -> Support:
        """Run the self-test again (after a start, or when ucm's hooks changed)."""
        from .. import native

        self.self_test = native.self_test(source="ucm")
        support = support_from(self.self_test)
        self._log.info(
            "release events from UCX's ucm",
            reason=reason,
            library=self.path,
            support=repr(support),
            self_test=self.self_test,
        )
        return support

    def stop(self) -> None:
        from .. import native

        with self._lock:
            if self.active:
                self.active = False
                native.ucm_source().release()
