"""Ready-made ``check``/``valid`` options for :meth:`ParamSpace.register`.

Each returns the two options as a mapping to spread into ``register``, so a
value outside the bounds is refused where it is given, with an error naming
the parameter, the value, its origin and what is valid.
"""

from __future__ import annotations

from typing import Any

from ._values import InvalidValue


def _options(valid: str, accepts: Any) -> dict[str, Any]:
    def check(value: Any) -> None:
        if not accepts(value):
            raise InvalidValue(f"expected {valid}")

    return {"check": check, "valid": valid}


def within(least: int, most: int | None = None, unit: str = "") -> dict[str, Any]:
    """An integer from ``least`` to ``most`` (no upper bound when ``None``)."""
    shown = f"{least} to {most}" if most is not None else f"at least {least}"
    return _options(
        f"{shown} {unit}".rstrip(),
        lambda value: least <= int(value) and (most is None or int(value) <= most),
    )


def one_of(*words: str) -> dict[str, Any]:
    """One of ``words``, in any case."""
    return _options(f"one of {', '.join(words)}", lambda value: str(value).lower() in words)


def power_of_two(least: int, most: int | None = None) -> dict[str, Any]:
    """A power of two from ``least`` to ``most`` (no upper bound when ``None``)."""
    shown = f"from {least} to {most}" if most is not None else f">= {least}"

    def accepts(value: Any) -> bool:
        number = int(value)
        return least <= number and (most is None or number <= most) and not number & (number - 1)

    return _options(f"a power of two {shown}", accepts)


__all__ = ["one_of", "power_of_two", "within"]
