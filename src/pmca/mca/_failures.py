"""Records of what went wrong with a component, kept instead of crashing.

Imported when a component fails (or when the type is named): a session
where every component works never builds it.
"""

from __future__ import annotations

from attrs import frozen

from .._public import public
from .._records import FrozenValue


@public
@frozen(eq=False, repr=False)
class ComponentFailure(FrozenValue):
    """One component that was skipped because something it did failed.

    Only text is kept: holding the exception would keep the component's
    frames, and so the component itself, alive after it was unloaded.
    """

    framework: str
    component: str
    hook: str
    location: str
    distribution: str | None
    error_type: str
    message: str
    traceback: str

    @classmethod
    def capture(
        cls,
        *,
        framework: str,
        component: str,
        hook: str,
        location: str,
        distribution: str | None,
        error: BaseException,
    ) -> ComponentFailure:
        import traceback  # when a component fails, not in every session

        return cls(
            framework,
            component,
            hook,
            location,
            distribution,
            type(error).__name__,
            str(error),
            "".join(traceback.format_exception(type(error), error, error.__traceback__)),
        )

    @property
    def reason(self) -> str:
        return f"{self.hook} failed: {self.error_type}: {self.message}"

    def __str__(self) -> str:
        return f"{self.framework}/{self.component} from {self.location}: {self.reason}"
