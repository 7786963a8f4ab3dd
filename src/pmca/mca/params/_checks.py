"""Ready-made ``check``/``valid`` options for :meth:`ParamSpace.register`.

Each returns the two options as a mapping to spread into ``register``, so a
value outside the bounds is refused where it is given, with an error naming
the parameter, the value, its origin and what is valid.
"""

from __future__ import annotations

import os
from typing import Any

from ..._public import public
from ._values import InvalidValue


def _options(valid: str, problem: Any) -> dict[str, Any]:
    """``check`` raising what ``problem(value)`` finds wrong (``None``: nothing), and ``valid``.

    The error adds the valid values itself: the reason says only what is wrong.
    A value the check cannot even compare (``int(inf)``) is refused, never raised.
    """

    def check(value: Any) -> None:
        try:
            wrong = problem(value)
        except (TypeError, ValueError, OverflowError):
            wrong = f"{value!r} is not a number in range"
        if wrong is not None:
            raise InvalidValue(wrong)

    return {"check": check, "valid": valid}


def _out_of(least: float, most: float | None, number: float) -> str | None:
    if number != number:  # NaN compares false with everything
        return "NaN is not a usable setting"
    if number < least:
        return f"{number} is below {least}"
    if most is not None and number > most:
        return f"{number} is above {most}"
    return None


@public
def within(
    least: float,
    most: float | None = None,
    unit: str = "",
    *,
    above: bool = False,
    or_zero: bool = False,
) -> dict[str, Any]:
    """A number from ``least`` to ``most`` (no upper bound when ``None``).

    ``above``: ``least`` itself is refused (a timeout of more than 0 s).
    ``or_zero``: 0 is accepted too (0 meaning "off" below a sane floor). NaN
    and infinities are outside every range with a finite bound.
    """
    shown = f"more than {least}" if above else f"at least {least}"
    if most is not None:
        shown = f"{shown} and at most {most}" if above else f"{least} to {most}"
    if or_zero:
        shown = f"0 or {shown}"

    def problem(value: Any) -> str | None:
        if or_zero and value == 0:
            return None
        if above and value == least:
            return f"{value} is not more than {least}"
        return _out_of(least, most, value)

    return _options(f"{shown} {unit}".rstrip(), problem)


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


#: The longest timeout, in seconds: a week, longer than any job waits and far
#: below what a socket or lock timeout overflows at.
MAX_TIMEOUT = 7 * 24 * 3600

#: Linux's PATH_MAX and NAME_MAX, in bytes: a longer path can never be opened.
PATH_MAX = 4096
NAME_MAX = 255


@public
def a_path(separator: str | None = None) -> dict[str, Any]:
    """A file or directory name (or a ``separator``-separated list of them).

    Refused where it is given rather than as a raw ``OSError`` where it is
    opened: a NUL byte, a path longer than ``PATH_MAX`` or a name in it
    longer than ``NAME_MAX`` bytes (encoded as the file system does).
    """
    valid = f"a path without NUL of at most {PATH_MAX} bytes, each name at most {NAME_MAX}"
    if separator is not None:
        valid = f"a {separator!r}-separated list of paths, each without NUL, of at most " + (
            f"{PATH_MAX} bytes, each name at most {NAME_MAX}"
        )

    def one(path: str) -> str | None:
        encoded = os.fsencode(path)
        if b"\0" in encoded:
            return "a path contains a NUL byte"
        if len(encoded) > PATH_MAX:
            return f"a path of {len(encoded)} bytes is longer than {PATH_MAX}"
        if any(len(name) > NAME_MAX for name in encoded.split(b"/")):
            return f"a name in a path is longer than {NAME_MAX} bytes"
        return None

    def problem(value: Any) -> str | None:
        text = str(value)
        for path in text.split(separator) if separator else [text]:
            wrong = one(path)
            if wrong is not None:
                return wrong
        return None

    return _options(valid, problem)


__all__ = ["MAX_TIMEOUT", "NAME_MAX", "PATH_MAX", "a_path", "one_of", "power_of_two", "within"]
