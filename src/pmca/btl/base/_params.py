"""The ``btl_<component>_*`` limit parameters every btl component registers."""

from __future__ import annotations

from collections.abc import Sequence

from ..._public import public
from ...mca._context import ComponentParams
from ...mca.params import ParamValueError, Source, within
from .._limits import Flags, Limits
from ._pvars import declare

#: The largest btl size or count: every native btl keeps them in 32-bit
#: fields, and a larger value must be refused, never truncated.
MAX_INT32 = 2**31 - 1

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
_SIZES = ("eager_limit", "rndv_eager_limit", "max_send_size")
_TYPES: dict[str, object] = {
    "exclusivity": int,
    "latency": int,
    "bandwidth": int,
    "eager_limit": "size",
    "rndv_eager_limit": "size",
    "max_send_size": "size",
}


#: The least value of each limit: a message needs at least one byte of room.
_LEAST = {"eager_limit": 1, "max_send_size": 1}


@public
def register_limits(
    params: ComponentParams, defaults: Limits, *, max_size: int = MAX_INT32
) -> None:
    """Register ``btl_<component>_{exclusivity,latency,bandwidth,eager_limit,...}``.

    Call it from the component's ``register`` hook with the component's
    defaults; :func:`read_limits` gives the values in force at ``query``.
    Every limit is bounded here (sizes by ``max_size``), and an eager limit
    above the max send size is refused here too: a wrong value is an error
    naming the parameter when the component registers, never a component
    dropped at query.
    It also declares the component's per-peer traffic pvars.
    """
    declare(params.component)
    for name, help_text in _HELP.items():
        most = max_size if name in _SIZES else MAX_INT32
        params.register(
            name,
            type=_TYPES[name],
            default=getattr(defaults, name),
            help=help_text,
            level=5 if name in ("exclusivity", "latency", "bandwidth") else 4,
            **within(_LEAST.get(name, 0), most, "bytes" if name in _SIZES else ""),
        )
    eager, largest = int(params["eager_limit"]), int(params["max_send_size"])
    if eager > largest:
        raise_param_error(
            params,
            ("eager_limit", "max_send_size"),
            f"{params.full_name('eager_limit')} = {eager} exceeds "
            f"{params.full_name('max_send_size')} = {largest}",
        )


@public
def raise_param_error(params: ComponentParams, names: Sequence[str], reason: str) -> None:
    """Refuse the values of ``names`` together for ``reason`` (a :class:`ParamValueError`).

    The error blames the first of them the user gave (a value from a default
    is the component's own fault; one the user gave is an error at init).
    """
    given = [params.param(name) for name in names]
    param = next((p for p in given if p.origin.source is not Source.DEFAULT), given[0])
    raise ParamValueError(
        param.full_name, param.value_string(), param.origin, param.valid_values(), reason
    )


@public
def check_committed(
    params: ComponentParams, parts: Sequence[tuple[str, str, int]], most: int, what: str
) -> None:
    """Refuse sizes whose product commits more than ``most`` bytes up front.

    ``parts`` are ``(size parameter, count parameter, overhead per item)``;
    the error names the parameters and blames the largest part.
    """
    costs = [(int(params[size]) + extra) * int(params[count]) for size, count, extra in parts]
    total = sum(costs)
    if total > most:
        size, count, _ = parts[costs.index(max(costs))]
        terms = " + ".join(f"{params.full_name(s)} x {params.full_name(c)}" for s, c, _ in parts)
        raise_param_error(
            params,
            [size, count, *(name for part in parts for name in part[:2])],
            f"{terms} commits {total} bytes for {what}, more than its maximum of {most} "
            f"(lower {params.full_name(size)} or {params.full_name(count)})",
        )


@public
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
