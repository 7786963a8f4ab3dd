"""Ready-made ``check``/``valid`` options for :meth:`ParamSpace.register`.

Each returns the two options as a mapping to spread into ``register``, so a
value outside the bounds is refused where it is given, with an error naming
the parameter, the value, its origin and what is valid.
"""

from __future__ import annotations

import os
from typing import Any

from ._values import InvalidValue


def _options(valid: str, accepts: Any) -> dict[str, Any]:
    def check(value: Any) -> None:
        try:
            accepted = accepts(value)
        except (TypeError, ValueError, OverflowError):  # int(inf), a word for a number...
            accepted = False
        if not accepted:
            raise InvalidValue(f"expected {valid}")

    return {"check": check, "valid": valid}


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

    def accepts(value: Any) -> bool:
        if or_zero and value == 0:
            return True
        low_ok = least < value if above else least <= value
        return bool(low_ok and (most is None or value <= most) and value == value)  # NaN != NaN

    return _options(f"{shown} {unit}".rstrip(), accepts)


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


#: The longest timeout, in seconds: a week, longer than any job waits and far
#: below what a socket or lock timeout overflows at.
MAX_TIMEOUT = 7 * 24 * 3600

#: Linux's PATH_MAX and NAME_MAX, in bytes: a longer path can never be opened.
PATH_MAX = 4096
NAME_MAX = 255


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

    def one(path: str) -> bool:
        encoded = os.fsencode(path)
        return (
            b"\0" not in encoded
            and len(encoded) <= PATH_MAX
            and all(len(name) <= NAME_MAX for name in encoded.split(b"/"))
        )

    def accepts(value: Any) -> bool:
        text = str(value)
        return all(one(path) for path in (text.split(separator) if separator else [text]))

    return _options(valid, accepts)


__all__ = ["MAX_TIMEOUT", "NAME_MAX", "PATH_MAX", "a_path", "one_of", "power_of_two", "within"]
