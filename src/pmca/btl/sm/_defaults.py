"""What the sm component needs before any module exists: limits, mechanisms, its library.

Kept apart from the module and the transport so that registering and
opening the component imports neither (a session of one rank may never
query it).
"""

from __future__ import annotations

import os

from .._limits import Flags, Limits

DEFAULTS = Limits(
    exclusivity=65535,  # below self (65536), far above tcp (100)
    latency=1,
    bandwidth=20_000,
    eager_limit=32 * 1024,
    rndv_eager_limit=32 * 1024,
    max_send_size=32 * 1024,
    flags=Flags.SEND | Flags.SEND_INPLACE | Flags.RDMA | Flags.SINGLE_COPY,
    put_limit=1 << 62,
    get_limit=1 << 62,
)
#: Single-copy mechanisms (``btl_sm_single_copy_mechanism``).
MECHANISMS = ("none", "cma", "emulated")

LIBRARY_NAME = "libpmca_btl_sm.so"


def library_path() -> str:
    """Where the transport library is installed: next to this module."""
    return os.path.join(os.path.dirname(__file__), LIBRARY_NAME)


__all__ = ["DEFAULTS", "LIBRARY_NAME", "MECHANISMS", "library_path"]
