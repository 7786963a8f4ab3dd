"""The ``btl_<component>_*`` limit parameters every btl component registers."""

from __future__ import annotations

from typing import Any

from ...mca._context import ComponentParams
from ...mca.params import InvalidValue
from .._interface import Flags, Limits

_HELP = {
    "exclusivity": "BTL exclusivity: when several BTLs reach a peer, only those with the "
    "highest exclusivity are used for it",
    "latency": "Approximate latency of the interconnect, in microseconds (orders BTLs of "
    "equal exclusivity)",
    "bandwidth": "Approximate maximum bandwidth of the interconnect, in Mbit/s (weights "
    "the striping of large messages)",
    "eager_limit": "Maximum size in bytes of an eager message (payload plus header)",
    "rndv_eager_limit": "Size in bytes of the data sent with a rendezvous request",
    "max_send_size": "Maximum size in bytes of a single send",
}
_TYPES: dict[str, object] = {
    "exclusivity": int,
    "latency": int,
    "bandwidth": int,
    "eager_limit": "size",
    "rndv_eager_limit": "size",
    "max_send_size": "size",
}


def within(least: int, most: int | None = None, unit: str = "") -> dict[str, Any]:
    """``check`` and ``valid`` options for an integer parameter bounded to ``least..most``.

    A value out of bounds is refused where it is given (an error naming the
    parameter and its origin), not discovered when the component is queried.
    """
    shown = f"{least} to {most}" if most is not None else f"at least {least}"
    valid = f"{shown} {unit}".rstrip()

    def check(value: Any) -> None:
        if int(value) < least or (most is not None and int(value) > most):
            raise InvalidValue(f"expected {valid}")

    return {"check": check, "valid": valid}


def one_of(*words: str) -> dict[str, Any]:
    """``check`` and ``valid`` options for a string parameter taking one of ``words``."""
    valid = ", ".join(words)

    def check(value: Any) -> None:
        if str(value).lower() not in words:
            raise InvalidValue(f"expected one of {valid}")

    return {"check": check, "valid": valid}


def power_of_two(least: int) -> dict[str, Any]:
    """``check`` and ``valid`` options for a power of two of at least ``least``."""
    valid = f"a power of two >= {least}"

    def check(value: Any) -> None:
        number = int(value)
        if number < least or number & (number - 1):
            raise InvalidValue(f"expected {valid}")

    return {"check": check, "valid": valid}


def register_limits(params: ComponentParams, defaults: Limits) -> None:
    """Register ``btl_<component>_{exclusivity,latency,bandwidth,eager_limit,...}``.

    Call it from the component's ``register`` hook with the component's
    defaults; :func:`read_limits` gives the values in force at ``query``.
    """
    for name, help_text in _HELP.items():
        params.register(
            name,
            type=_TYPES[name],
            default=getattr(defaults, name),
            help=help_text,
            level=5 if name in ("exclusivity", "latency", "bandwidth") else 4,
        )


def read_limits(params: ComponentParams, defaults: Limits) -> Limits:
    """The limits in force: the registered parameters over ``defaults``.

    Raises ``ValueError`` naming the parameter when the values contradict
    each other (an eager limit above the largest send).
    """
    values = {name: int(params[name]) for name in _HELP}
    for name, value in values.items():
        if value < 0:
            raise ValueError(f"{params.full_name(name)} = {value}: must not be negative")
    if values["eager_limit"] > values["max_send_size"]:
        raise ValueError(
            f"{params.full_name('eager_limit')} = {values['eager_limit']} exceeds "
            f"{params.full_name('max_send_size')} = {values['max_send_size']}"
        )
    return Limits(
        flags=Flags(defaults.flags),
        put_limit=defaults.put_limit,
        get_limit=defaults.get_limit,
        **values,
    )
