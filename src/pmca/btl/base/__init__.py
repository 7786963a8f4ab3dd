"""What every btl component builds on: limits, module bookkeeping, registration, modex."""

from __future__ import annotations

from ._framework_base import BtlBase
from ._modex import RankEntry, host_id
from ._module import ModuleBase
from ._params import read_limits, register_limits
from ._registration import Backend, NoPinBackend, Registrations, leave_pinned_wanted, page_range

__all__ = [
    "Backend",
    "BtlBase",
    "ModuleBase",
    "NoPinBackend",
    "RankEntry",
    "Registrations",
    "host_id",
    "leave_pinned_wanted",
    "page_range",
    "read_limits",
    "register_limits",
]
