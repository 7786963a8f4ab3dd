"""The ``btl_<component>_*`` limit parameters every btl component registers."""

from __future__ import annotations

from ..._public import public
from ...mca._context import ComponentParams
from .._interface import Flags, Limits
from ._pvars import declare

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


@public
def register_limits(params: ComponentParams, defaults: Limits) -> None:
    """Register ``btl_<component>_{exclusivity,latency,bandwidth,eager_limit,...}``.

    Call it from the component's ``register`` hook with the component's
    defaults; :func:`read_limits` gives the values in force at ``query``.
    It also declares the component's per-peer traffic pvars.
    """
    declare(params.component)
    for name, help_text in _HELP.items():
        params.register(
            name,
            type=_TYPES[name],
            default=getattr(defaults, name),
            help=help_text,
            level=5 if name in ("exclusivity", "latency", "bandwidth") else 4,
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
