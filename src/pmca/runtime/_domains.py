"""Finalize cleanup domains (Open MPI's ``opal_finalize_domain_t``)."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from .._forksafe import short_lock
from .._public import public

if TYPE_CHECKING:
    from ._failures import CleanupFailure


@public
class FinalizeDomain:
    """Cleanups run in reverse order of registration, each isolated from the others."""

    def __init__(self, name: str) -> None:
        self.name = name
        self._lock = short_lock()
        self._cleanups: list[tuple[str, Callable[[], object]]] = []

    def append(self, cleanup: Callable[[], object], name: str | None = None) -> None:
        label = name or str(getattr(cleanup, "__qualname__", repr(cleanup)))
        with self._lock:
            self._cleanups.append((label, cleanup))

    def __len__(self) -> int:
        return len(self._cleanups)

    def run(self) -> list[CleanupFailure]:
        """Run every cleanup, last registered first, and empty the domain.

        A cleanup's ``BaseException`` is reported like any failure, and the
        caller raises it again after all of them ran.
        """
        with self._lock:
            cleanups, self._cleanups = self._cleanups, []
        failures: list[CleanupFailure] = []
        for label, cleanup in reversed(cleanups):
            try:
                cleanup()
            except BaseException as exc:  # the caller raises it again once all ran
                from ._failures import CleanupFailure

                failures.append(CleanupFailure(self.name, label, exc))
        return failures
