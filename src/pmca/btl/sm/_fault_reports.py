"""How the sm module reports what a poll or a send found wrong in a segment.

A peer's fault (a bad FIFO entry, a producer dead mid-send, its segment found
overwritten by a send) fails that peer; this process's own segment found
overwritten fails every peer once; a peer that marked its own segment broken
fails before this process sleeps waiting for it.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from .._interface import Endpoint, PeerFailed
from ._transport import PeerFault, SegmentOverwritten, Transport, TransportError

if TYPE_CHECKING:
    from structlog.typing import FilteringBoundLogger


class FaultReports:
    """Mixed into :class:`SmModule` (which provides the attributes declared here)."""

    transport: Transport
    log: FilteringBoundLogger
    _endpoints: Mapping[int, Any]

    if TYPE_CHECKING:  # the btl base's, found after this class in SmModule's MRO

        def peer_lost(self, endpoint: Endpoint, error: BaseException) -> None: ...

    def init_fault_reports(self) -> None:
        self._overwritten = False  # our own segment was found overwritten
        self._broken_peers: set[int] = set()  # peers that found theirs overwritten

    def fault(self, exc: PeerFault) -> PeerFailed | None:
        """A peer broke the FIFO protocol, died mid-send or its segment was overwritten:
        that peer's failure (returned, when it is a peer of this module)."""
        endpoint = self._endpoints.get(exc.peer)
        if endpoint is None:
            self.log.error("sm receive FIFO entry dropped", why=exc.strerror)
            return None
        error = PeerFailed(f"btl sm: rank {exc.peer}: {exc.strerror}", rank=exc.peer)
        self.peer_lost(endpoint, error)
        return error

    def segment_overwritten(self, exc: SegmentOverwritten) -> None:
        """Our own FIFO cannot be read any more: no peer is heard from again (each fails
        once; the transport keeps answering this until it is closed)."""
        if self._overwritten:
            return
        self._overwritten = True
        self.log.error("sm segment overwritten", why=exc.strerror)
        for rank, endpoint in list(self._endpoints.items()):
            self.peer_lost(
                endpoint,
                PeerFailed(
                    f"btl sm: rank {rank}: nothing more can be received from it: {exc.strerror}",
                    rank=rank,
                ),
            )

    def _poll_past_faults(self, exc: TransportError) -> tuple[int, int, memoryview] | None:
        """Report ``exc`` (raised by a poll), then poll on past peers' faults: at most a
        FIFO's worth (each poll takes an entry; the next progress goes on)."""
        for _ in range(self.transport.config.fifo_capacity):
            if not self._report(exc):
                return None
            try:
                return self.transport.poll()
            except TransportError as again:
                exc = again
        self._report(exc)
        return None

    def _report(self, exc: TransportError) -> bool:
        """A poll's error: a peer's fault (True: poll on), our own segment overwritten
        (False: nothing more to take), else raised."""
        if isinstance(exc, SegmentOverwritten):
            self.segment_overwritten(exc)
            return False
        if not isinstance(exc, PeerFault):
            raise exc
        self.fault(exc)
        return True

    def _check_broken_peers(self) -> None:
        """Before a sleep: a peer that found its own segment overwritten never answers
        (one load per peer, idle only)."""
        for rank in self._endpoints:
            if rank not in self._broken_peers:
                fault = self.transport.broken(rank)
                if fault is not None:
                    self._broken_peers.add(rank)
                    self.fault(fault)


__all__ = ["FaultReports"]
