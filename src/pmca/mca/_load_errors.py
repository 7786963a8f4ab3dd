"""``mca_base_component_show_load_errors``: which component failures are shown as they happen."""

from __future__ import annotations

__all__ = [
    "SHOW_LOAD_ERRORS_VALID",
    "show_load_errors_items",
    "show_load_errors_matches",
    "show_load_errors_problem",
]

_SHOW_ALL = ("all", "1", "true", "yes", "y", "t", "enabled")
_SHOW_NONE = ("none", "", "0", "false", "no", "n", "f", "disabled")

#: What ``mca_base_component_show_load_errors`` accepts.
SHOW_LOAD_ERRORS_VALID = (
    "'all', 'none', a boolean, or a comma-separated list of framework names and "
    "framework/component pairs, negated by a leading '^'"
)


def show_load_errors_items(setting: str) -> tuple[bool, list[str]] | None:
    """``(negated, items)`` of a list value; ``None`` for ``all``/``none``/a boolean."""
    text = setting.strip()
    if text.lower() in _SHOW_ALL or text.lower() in _SHOW_NONE:
        return None
    negate = text.startswith("^")
    return negate, [item.strip() for item in text[1 if negate else 0 :].split(",")]


def show_load_errors_problem(setting: str) -> str | None:
    """Why ``setting`` is not a valid ``mca_base_component_show_load_errors``, or ``None``."""
    from ._names import COMPONENT_NAME, FRAMEWORK_NAME

    parsed = show_load_errors_items(setting)
    if parsed is None:
        return None
    for item in parsed[1]:
        framework, slash, component = item.partition("/")
        if not item:
            return "empty item in the list"
        if "^" in item:
            return "'^' may only appear once, at the start of the list"
        if not FRAMEWORK_NAME.fullmatch(framework) or (
            slash and not COMPONENT_NAME.fullmatch(component)
        ):
            head, dash, tail = item.partition("-")
            hint = f"; did you mean '{head}/{tail}'?" if dash else ""
            return f"{item!r} is not a framework or framework/component name{hint}"
    return None


def show_load_errors_matches(setting: str, framework: str, component: str) -> bool:
    """Open MPI's ``mca_base_component_show_load_errors`` grammar.

    ``all``/``none``, a boolean, or a ``[^]fw[/comp],...`` list.
    """
    text = setting.strip()
    if text.lower() in _SHOW_ALL:
        return True
    parsed = show_load_errors_items(text)
    if parsed is None:
        return False
    negate, items = parsed
    hit = any(item in (framework, f"{framework}/{component}") for item in items)
    return hit != negate
