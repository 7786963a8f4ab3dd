"""Finalize cleanup domains (Open MPI's ``opal_finalize_domain_t``)."""

from __future__ import annotations

import threading
from collections.abc import Callable

from attrs import frozen


@frozen
class CleanupFailure:
    domain: str
    cleanup: str
    error: BaseException

    def __str__(self) -> str:
        return f"cleanup {self.cleanup!r} of domain {self.domain!r} raised {self.error!r}"


class FinalizeDomain:
    """Cleanups run in reverse order of registration, each isolated from the others."""

    def __init__(self, name: str) -> None:
        self.name = name
        self._lock = threading.Lock()
        self._cleanups: list[tuple[str, Callable[[], object]]] = []

    def append(self, cleanup: Callable[[], object], name: str | None = None) -> None:
        label = name or str(getattr(cleanup, "__qualname__", repr(cleanup)))
        with self._lock:
            self._cleanups.append((label, cleanup))

    def __len__(self) -> int:
        return len(self._cleanups)

    def run(self) -> list[CleanupFailure]:
        """Run every cleanup, last registered first, and empty the domain."""
        with self._lock:
            cleanups, self._cleanups = self._cleanups, []
        failures: list[CleanupFailure] = []
        for label, cleanup in reversed(cleanups):
            try:
                cleanup()
            except Exception as exc:
                failures.append(CleanupFailure(self.name, label, exc))
        return failures
