"""The memory module of memory/ucm."""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import TYPE_CHECKING

from ..._public import public
from .._interface import Support
from .._pvars import emit_overwrite, support_source
from .._sources import UcmDelivery

if TYPE_CHECKING:
    from structlog.typing import FilteringBoundLogger

    from ...native import Overwrite


@public
class UcmMemory:
    """Subscribes to UCX's ucm at install; its support level comes from the self-test.

    ``load`` is the libucs to load when UCX is not loaded yet (``""``: look in
    this environment's MPI wheels), or None to only use a UCX already loaded.
    """

    def __init__(self, log: FilteringBoundLogger, load: str | None) -> None:
        self._log = log
        self._load = load
        self._delivery = UcmDelivery(log)
        self._support = Support.NONE
        self._install_lock = threading.Lock()
        self._stop_watching: Callable[[], None] | None = None
        support_source("ucm", self)

    @property
    def support_now(self) -> int:
        """The support level without checking for overwrites (the pvar's cheap read)."""
        return int(self._support)

    @property
    def source(self) -> str:
        return "ucm" if self._delivery.active else "none"

    @property
    def self_test(self) -> dict[str, bool]:
        return dict(self._delivery.self_test)

    def support_level(self) -> Support:
        if self._delivery.active:
            from ... import native

            native.check_overwrites(wait=True)
        return self._support

    def installed(self) -> bool:
        return self._delivery.active

    def install(self, reason: str) -> Support:
        from ... import native
        from .._base import MemoryHooksUnavailable

        with self._install_lock:
            if self._delivery.active:
                return self._support
            support = self._delivery.start(reason, load=self._load)
            if not support:
                failed = [s for s, ok in self._delivery.self_test.items() if not ok]
                self._delivery.stop()
                raise MemoryHooksUnavailable(
                    f"UCX's ucm delivers no release events ({reason}): self-test saw none "
                    f"for {', '.join(failed)}"
                )
            self._support = support
            self._stop_watching = native.on_overwrite(self._overwritten)
            return support

    def _overwritten(self, overwrite: Overwrite) -> None:
        if not overwrite.guarded_changed:
            return
        emit_overwrite("ucm", overwrite.symbols, overwrite.foreign)
        self._log.error(
            "UCX's ucm hooks changed; every registration is treated as invalid",
            what=overwrite.describe(),
        )
        self._support = self._delivery.retest("ucm's hooks changed")

    def close(self) -> None:
        stop, self._stop_watching = self._stop_watching, None
        if stop is not None:
            stop()
        self._delivery.stop()
        self._support = Support.NONE
