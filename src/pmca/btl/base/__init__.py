"""What every btl component builds on: limits, module bookkeeping, registration, modex.

The framework base and the limit helpers are imported with the package (every
btl open needs them); the rest at first use, since a session of one rank
registers its btl components without ever querying them.
"""

from __future__ import annotations

from ..._lazy import lazy_attributes
from ._framework_base import BtlBase
from ._params import MAX_INT32, check_committed, raise_param_error, read_limits, register_limits

TYPE_CHECKING = False  # typing.TYPE_CHECKING, without importing typing for it
if TYPE_CHECKING:
    from ._modex import RankEntry, host_id, host_name
    from ._module import ModuleBase
    from ._registration import (
        Backend,
        NoPinBackend,
        Registrations,
        leave_pinned_wanted,
        page_range,
    )

_TARGETS = {
    "RankEntry": "._modex:RankEntry",
    "host_id": "._modex:host_id",
    "host_name": "._modex:host_name",
    "ModuleBase": "._module:ModuleBase",
    "Backend": "._registration:Backend",
    "NoPinBackend": "._registration:NoPinBackend",
    "Registrations": "._registration:Registrations",
    "leave_pinned_wanted": "._registration:leave_pinned_wanted",
    "page_range": "._registration:page_range",
}

if not TYPE_CHECKING:  # mypy sees the imports above, and no catch-all
    __getattr__, __dir__ = lazy_attributes(__name__, _TARGETS)

__all__ = [
    "MAX_INT32",
    "Backend",
    "BtlBase",
    "ModuleBase",
    "NoPinBackend",
    "RankEntry",
    "Registrations",
    "check_committed",
    "host_id",
    "host_name",
    "leave_pinned_wanted",
    "page_range",
    "raise_param_error",
    "read_limits",
    "register_limits",
]
