"""Flow control on the receiving side: a peer's socket is not read while the
message layer holds more than ``btl_tcp_recv_queue_limit`` of its messages.

The message layer keeps every message that arrives before its receive (the
unexpected queue). Read without a bound, a sender faster than its receiver
moves its whole output into the receiver's memory. So after each active
message a connection hands over, :meth:`FlowControl.arrived` compares what
the message layer holds from that peer (``pmca.btl.Holding``) with the
limit; above it, and unless the receiver waits for anything from that peer,
the connection stops reading (:attr:`Connection.paused`): it leaves polling,
and its parser takes no further active message out of what it has read
already. The kernel's socket buffers fill, then the sender's own
``btl_tcp_send_queue_limit``: its sends wait. Nothing is dropped.

Reading starts again (:meth:`FlowControl.eased`, the message layer's
``holding_eased``) once receives have taken the peer's messages down to half
the limit, or as soon as the receiver waits for something from that peer (a
receive posted, a probe, a rendezvous answer, finalize): what it waits for
may be behind the stopped input, and matching must stay in arrival order.
Then the bound is exceeded while that wait lasts, as the MPI order requires.
A message already being received completes first, so what is held may pass
the limit by one message (at most ``btl_tcp_eager_limit``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from .._holding import EVERY_PEER

if TYPE_CHECKING:
    from structlog.typing import FilteringBoundLogger

    from .._holding import Holding
    from ._connection import Connection
    from ._polling import Polling
    from ._transfers import Transfers


class FlowControl:
    """One rail's stopped connections and the rule that stops and restarts them."""

    def __init__(
        self, limit: int, polling: Polling, transfers: Transfers, log: FilteringBoundLogger
    ) -> None:
        self.limit = limit
        self._polling = polling
        self._transfers = transfers
        self._log = log
        self.holding: Holding | None = None
        #: Connections not read now, by peer rank.
        self.paused: dict[int, Connection] = {}

    def arrived(self, connection: Connection) -> None:
        """After an active message from ``connection`` was handed over: stop reading
        it if its peer's held messages passed the limit and nothing waits for it."""
        holding = self.holding
        if holding is None or connection.paused:
            return
        rank = connection.rank
        held = holding.held[rank]
        if held <= self.limit or self._awaited(holding, rank) or connection.closed is not None:
            return
        connection.paused = True
        connection.pauses += 1
        self.paused[rank] = connection
        self._polling.pause(connection)
        self._log.debug("stopped reading", rank=rank, held=held, limit=self.limit)

    def eased(self, rank: int) -> None:
        """The message layer holds less from ``rank`` or waits for it (-1: any peer)."""
        if not self.paused:
            return
        holding = self.holding
        if rank == EVERY_PEER:
            chosen = list(self.paused.values())
        else:
            found = self.paused.get(rank)
            if found is None:
                return
            chosen = [found]
        for connection in chosen:
            if (
                holding is None
                or holding.held[connection.rank] <= self.limit // 2
                or self._awaited(holding, connection.rank)
            ):
                self.resume(connection)

    def resume(self, connection: Connection) -> None:
        """Read ``connection`` again."""
        if not self.forget(connection):
            return
        self._polling.resume(connection)
        # Frames read before the stop show on no poll: progress parses them now.
        connection.frames_waiting = connection.holds_frame()
        self._log.debug("reading again", rank=connection.rank)

    def forget(self, connection: Connection) -> bool:
        """``connection`` is no longer stopped (closed, or about to be read): whether it was."""
        if self.paused.get(connection.rank) is connection:
            del self.paused[connection.rank]
        was, connection.paused = connection.paused, False
        return was

    def _awaited(self, holding: Holding, rank: int) -> bool:
        return holding.awaits(rank) or self._transfers.awaits(rank)


__all__ = ["FlowControl"]
