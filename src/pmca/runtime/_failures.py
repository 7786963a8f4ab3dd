"""What failed in the runtime: a third-party framework, a finalize cleanup.

Imported when something fails (or when these types are named): a session
where everything works never builds them.
"""

from __future__ import annotations

from attrs import frozen

from .._public import public
from .._records import FrozenValue

__all__ = ["CleanupFailure", "FrameworkFailure"]


@frozen(eq=False, repr=False)
class FrameworkFailure(FrozenValue):
    """A third-party framework that could not be loaded.

    ``clash`` is set when it declares the name of one of pmca's built-in
    frameworks (where that one comes from): the built-in framework is used
    and works; only this declaration is ignored.
    """

    name: str
    location: str
    reason: str
    distribution: str | None = None
    clash: str | None = None

    @property
    def label(self) -> str:
        """``framework btl``; for a clash, also where it came from and that it clashes."""
        if self.clash is None:
            return f"framework {self.name}"
        origin = f"distribution {self.distribution}" if self.distribution else self.location
        return f"framework {self.name} from {origin}, a name clash with the built-in {self.name}"

    def __str__(self) -> str:
        return f"framework {self.name} from {self.location}: {self.reason}"


@public
@frozen(eq=False, repr=False)
class CleanupFailure(FrozenValue):
    domain: str
    cleanup: str
    error: BaseException

    def __str__(self) -> str:
        return f"cleanup {self.cleanup!r} of domain {self.domain!r} raised {self.error!r}"
