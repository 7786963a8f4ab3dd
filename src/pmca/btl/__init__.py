"""The byte transfer layer: the btl framework, its components and the bml.

The module API every component implements (:class:`BtlModule`,
:class:`Flags`, :class:`Endpoint`...) is exported here; :mod:`pmca.btl.base`
has the helpers components build on.
"""

from __future__ import annotations

from .._lazy import lazy_attributes
from ._framework import FRAMEWORK
from ._holding import EVERY_PEER, Holding
from ._limits import (
    API_VERSION,
    TAG_DOCTOR,
    TAG_MAX,
    TAG_P2P_FIRST,
    TAG_P2P_LAST,
    TAG_USER,
    Flags,
    Limits,
)

TYPE_CHECKING = False  # typing.TYPE_CHECKING, without importing typing for it
if TYPE_CHECKING:
    from ._interface import (
        MAX_PACKED_HANDLE,
        PLACEMENT_HEAD,
        BtlError,
        BtlModule,
        Completion,
        Endpoint,
        ErrorCallback,
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

#: The rest of the module interface, imported at first use: registering the
#: components (``pmca info``) needs only the names above.
_TARGETS = {
    "MAX_PACKED_HANDLE": "._interface:MAX_PACKED_HANDLE",
    "PLACEMENT_HEAD": "._interface:PLACEMENT_HEAD",
    "BtlError": "._interface:BtlError",
    "BtlModule": "._interface:BtlModule",
    "Completion": "._interface:Completion",
    "Endpoint": "._interface:Endpoint",
    "ErrorCallback": "._interface:ErrorCallback",
    "MemoryHandle": "._interface:MemoryHandle",
    "ModexError": "._interface:ModexError",
    "PeerFailed": "._interface:PeerFailed",
    "PeerFinalized": "._interface:PeerFinalized",
    "Placement": "._interface:Placement",
    "Placer": "._interface:Placer",
    "Proc": "._interface:Proc",
    "QueuedSend": "._interface:QueuedSend",
    "RecvCallback": "._interface:RecvCallback",
}

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

if not TYPE_CHECKING:  # mypy sees the imports above, and no catch-all
    __getattr__, __dir__ = lazy_attributes(__name__, _TARGETS)
