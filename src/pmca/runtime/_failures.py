"""What failed in the runtime: a third-party framework, a finalize cleanup.

Imported when something fails (or when these types are named): a session
where everything works never builds them.
"""

from __future__ import annotations

from attrs import frozen

from .._records import FrozenValue

__all__ = ["CleanupFailure", "FrameworkFailure"]


@frozen(eq=False, repr=False)
class FrameworkFailure(FrozenValue):
    """A third-party framework that could not be loaded."""

    name: str
    location: str
    reason: str

    def __str__(self) -> str:
        return f"framework {self.name} from {self.location}: {self.reason}"


@frozen(eq=False, repr=False)
class CleanupFailure(FrozenValue):
    domain: str
    cleanup: str
    error: BaseException

    def __str__(self) -> str:
        return f"cleanup {self.cleanup!r} of domain {self.domain!r} raised {self.error!r}"
