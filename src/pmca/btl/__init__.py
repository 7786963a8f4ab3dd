"""The byte transfer layer: the btl framework, its components and the bml.

See :mod:`pmca.btl._interface` for the module API every component
implements, and :mod:`pmca.btl.base` for the helpers components build on.
"""

from __future__ import annotations

from ._framework import FRAMEWORK
from ._interface import (
    API_VERSION,
    MAX_PACKED_HANDLE,
    PLACEMENT_HEAD,
    TAG_DOCTOR,
    TAG_MAX,
    TAG_P2P_FIRST,
    TAG_P2P_LAST,
    TAG_USER,
    BtlError,
    BtlModule,
    Completion,
    Endpoint,
    ErrorCallback,
    Flags,
    Limits,
    MemoryHandle,
    ModexError,
    PeerFailed,
    Placement,
    Placer,
    Proc,
    RecvCallback,
)

__all__ = [
    "API_VERSION",
    "FRAMEWORK",
    "MAX_PACKED_HANDLE",
    "PLACEMENT_HEAD",
    "TAG_DOCTOR",
    "TAG_MAX",
    "TAG_P2P_FIRST",
    "TAG_P2P_LAST",
    "TAG_USER",
    "BtlError",
    "BtlModule",
    "Completion",
    "Endpoint",
    "ErrorCallback",
    "Flags",
    "Limits",
    "MemoryHandle",
    "ModexError",
    "PeerFailed",
    "Placement",
    "Placer",
    "Proc",
    "RecvCallback",
]
