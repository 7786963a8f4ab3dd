"""What goes wrong in the sm transport: its calls' errors and its peers' faults.

A peer's segment is not trusted (see ``sm.h``): what it breaks is reported
as that peer's fault (:class:`PeerFault`), this process's own segment
overwritten as :class:`SegmentOverwritten`, and a peer that finalized as
:class:`PeerClosed`.
"""

from __future__ import annotations

import errno


class TransportError(OSError):
    """A transport operation failed; the message names the peer and the call."""


class PeerFault(TransportError):
    """Peer :attr:`peer` broke the protocol or died mid-send; its entry was dropped."""

    def __init__(self, code: int, message: str, peer: int) -> None:
        super().__init__(code, message)
        self.peer = peer


class SegmentOverwritten(TransportError):
    """Another process wrote into this process's own segment what no sm producer
    writes: its receive FIFO cannot be read any more (every peer is unheard from)."""


class PeerClosed(TransportError):
    """Peer :attr:`peer` closed its segment (it finalized): nothing sent to it is read."""

    def __init__(self, peer: int) -> None:
        super().__init__(
            errno.ESHUTDOWN,
            f"sm peer {peer} closed its segment (it finalized): nothing sent to it is read",
        )
        self.peer = peer


def fault(status: int, source: int) -> PeerFault | None:
    """The :class:`PeerFault` a receive status reports about ``source``, if it is one."""
    if status == -errno.EOWNERDEAD:
        return PeerFault(
            errno.EOWNERDEAD,
            f"sm peer {source} died between claiming a cell of this process's receive FIFO "
            "and filling it (the cell was skipped)",
            source,
        )
    if status == -errno.EBADMSG:
        return PeerFault(
            errno.EBADMSG,
            f"sm peer {source} queued an entry that names no fragment of its segment, or a "
            "fragment with an impossible length or tag (dropped)",
            source,
        )
    return None


__all__ = ["PeerClosed", "PeerFault", "SegmentOverwritten", "TransportError", "fault"]
