"""The byte transfer layer: the btl framework, its components and the bml.

The module API every component implements (:class:`BtlModule`,
:class:`Flags`, :class:`Endpoint`...) is exported here; :mod:`pmca.btl.base`
has the helpers components build on.
"""

from __future__ import annotations

from ._framework import FRAMEWORK
from ._holding import EVERY_PEER, Holding
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
    PeerFinalized,
    Placement,
    Placer,
    Proc,
    QueuedSend,
    RecvCallback,
)

__all__ = [
    "API_VERSION",
    "EVERY_PEER",
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
    "Holding",
    "Limits",
    "MemoryHandle",
    "ModexError",
    "PeerFailed",
    "PeerFinalized",
    "Placement",
    "Placer",
    "Proc",
    "QueuedSend",
    "RecvCallback",
]
