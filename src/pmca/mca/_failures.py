"""Records of what went wrong with a component, kept instead of crashing."""

from __future__ import annotations

import traceback

from attrs import frozen


@frozen
class ComponentFailure:
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


def show_load_errors_matches(setting: str, framework: str, component: str) -> bool:
    """Open MPI's ``mca_base_component_show_load_errors`` grammar.

    ``all``/``none``, a boolean, or a ``[^]fw[/comp],...`` list.
    """
    text = setting.strip()
    lowered = text.lower()
    if lowered in ("all", "1", "true", "yes", "y", "t", "enabled"):
        return True
    if lowered in ("none", "", "0", "false", "no", "n", "f", "disabled"):
        return False
    negate = text.startswith("^")
    items = [item.strip() for item in text.lstrip("^").split(",") if item.strip()]
    hit = any(item in (framework, f"{framework}/{component}") for item in items)
    return hit != negate
