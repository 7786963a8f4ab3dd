"""The overwrite patcher module."""

from __future__ import annotations

import ctypes
from typing import TYPE_CHECKING

from ..._forksafe import short_lock
from ..._interrupts import deferred_interrupts
from ..._public import public
from ._counts import COUNTS
from ._table import PatchTable

if TYPE_CHECKING:
    from structlog.typing import FilteringBoundLogger

    from ...native import HookBackend
    from .._patches import PatchRecord, RestoreOutcome


@public
class OverwriteModule:
    """Applies patches through the native backend and records them in its table."""

    def __init__(self, table: PatchTable, hooks: HookBackend, log: FilteringBoundLogger) -> None:
        self._table = table
        self._hooks = hooks
        self._log = log
        self._lock = short_lock()

    def patch_symbol(self, symbol: str, *, owner: str) -> PatchRecord:
        # The patch and its record go together: an interrupt between them
        # would leave libc patched with nothing to restore it.
        with deferred_interrupts(), self._lock:
            for record in self.patches():
                if record.symbol == symbol:
                    return record
            try:
                site = self._hooks.install(symbol)
            except Exception as refused:
                self._count_foreign(symbol, refused)
                raise
            try:
                self._table.add(site, owner)
            except BaseException:
                self._hooks.restore(site)  # never a patch without its record
                raise
            COUNTS["installed"] += 1
        self._log.debug("patched", symbol=symbol, address=hex(site.address), owner=owner)
        from .._patches import PatchRecord

        return PatchRecord(symbol, site.patch_address, site.original, site.patched, owner)

    def _count_foreign(self, symbol: str, error: Exception) -> None:
        """Count a refusal caused by another library's jump at the entry (a rare path)."""
        from ...native import PatchRefused, foreign_patches

        if isinstance(error, PatchRefused) and symbol in foreign_patches(self._hooks, (symbol,)):
            COUNTS["foreign"] += 1

    def base_part(self) -> tuple[int, int]:
        """Address and size of the base part of this module's native library."""
        return self._table.base_part()

    def patches(self) -> list[PatchRecord]:
        return self._table.records()

    def restore_all(self) -> list[RestoreOutcome]:
        with deferred_interrupts(), self._lock:
            return self._restore_all()

    def _restore_all(self) -> list[RestoreOutcome]:
        outcomes: list[RestoreOutcome] = []
        while (record := self._table.pop()) is not None:
            from .._patches import RestoreOutcome  # a close with no patch never builds it

            site = self._hooks.site(record.symbol)
            if site is not None:
                restored = self._hooks.restore(site)
            else:
                restored = ctypes.string_at(record.address, len(record.original)) == record.original
            COUNTS["restored" if restored else "not_ours"] += 1
            if not restored:
                self._log.warning(
                    "patch no longer ours; left in pass-through", symbol=record.symbol
                )
            outcomes.append(RestoreOutcome(record, restored))
        return outcomes
