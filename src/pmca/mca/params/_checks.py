"""Ready-made ``check``/``valid`` options for :meth:`ParamSpace.register`.

Each returns the two options as a mapping to spread into ``register``, so a
value outside the bounds is refused where it is given, with an error naming
the parameter, the value, its origin and what is valid.
"""

from __future__ import annotations

from typing import Any

from ..._public import public
from ._values import InvalidValue


def _options(valid: str, problem: Any) -> dict[str, Any]:
    """``check`` raising what ``problem(value)`` finds wrong (``None``: nothing), and ``valid``.

    The error adds the valid values itself: the reason says only what is wrong.
    """

    def check(value: Any) -> None:
        wrong = problem(value)
        if wrong is not None:
            raise InvalidValue(wrong)

    return {"check": check, "valid": valid}


def _out_of(least: int, most: int | None, number: int) -> str | None:
    if number < least:
        return f"{number} is below {least}"
    if most is not None and number > most:
        return f"{number} is above {most}"
    return None


@public
def within(least: int, most: int | None = None, unit: str = "") -> dict[str, Any]:
    """An integer from ``least`` to ``most`` (no upper bound when ``None``)."""
    shown = f"{least} to {most}" if most is not None else f"at least {least}"
    return _options(f"{shown} {unit}".rstrip(), lambda value: _out_of(least, most, int(value)))


@public
def one_of(*words: str) -> dict[str, Any]:
    """One of ``words``, in any case."""
    return _options(
        f"one of {', '.join(words)}",
        lambda value: None if str(value).lower() in words else "not one of the accepted words",
    )


@public
def power_of_two(least: int, most: int | None = None) -> dict[str, Any]:
    """A power of two from ``least`` to ``most`` (no upper bound when ``None``)."""
    shown = f"from {least} to {most}" if most is not None else f">= {least}"

    def problem(value: Any) -> str | None:
        number = int(value)
        if number & (number - 1) or number <= 0:
            return f"{number} is not a power of two"
        return _out_of(least, most, number)

    return _options(f"a power of two {shown}", problem)


__all__ = ["one_of", "power_of_two", "within"]
