"""Leaving is a message: how a rank finalizes its p2p without losing or stranding anything.

At finalize every rank sends each peer it still reaches a LEAVE, behind all
its data on the same route, and keeps progressing every btl:

1. until its own sends are delivered (and its LEAVEs handed to the
   transport), at most ``pmca_base_finalize_timeout`` seconds; what is left
   then is reported once (peer, tag, count, bytes) and those requests fail;
2. until every peer acknowledged its LEAVE (LEAVE_ACK) and every message
   that peer sent before acknowledging has arrived: then nothing more comes
   from that peer and all of this rank's data reached it, so closing the
   connection loses nothing. Bounded by ``pmca_base_modex_timeout`` (like
   the barrier it replaces); after an exception, by the finalize timeout.

From its LEAVE on, a rank accepts no new send or receive (another thread's
fails at once, saying the session is finalizing).

A rank that receives a LEAVE (in sequence: after every message sent before
it) answers LEAVE_ACK at its next progress, and from then on the peer is
gone: receives waiting on it, rendezvous sends to it still waiting for its
answer, and new sends and receives naming it, fail at once with
:class:`pmca.btl.PeerFinalized`; messages it sent earlier can still be
received. That no answer can follow: a rank sends its LEAVE on the route
of its FINs and clear-to-sends, behind them, only once it finished the
rendezvous reads from that peer under way (within the finalize bound),
and it starts no read from a peer after telling it it leaves (such a
message stays unreceived and is reported). Messages that arrived and were
never received are reported once at finalize, naming peer, tag and size.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING

from .._public import public
from ..btl import BtlError, PeerFinalized, QueuedSend
from ..mca._errors import warn_user
from . import _protocol as proto
from ._requests import Request

if TYPE_CHECKING:
    from structlog.typing import FilteringBoundLogger

    from ..btl.bml import Bml, BmlPeer
    from ._matching import Posted, Unexpected
    from ._rendezvous import Fragments, Incoming

__all__ = ["FinalizeWarning", "Leaving", "summary"]

_MATCH_SIZE = proto.MATCH.size
#: Progress rounds that settle sends to this rank itself a receive matched.
_SELF_ROUNDS = 1000


@public
class FinalizeWarning(UserWarning):
    """A session's finalize could not deliver some messages, or saw some never received.

    Said once per finding, naming peer, tag, count and bytes; the requests of
    sends not delivered fail with :class:`pmca.btl.BtlError`.
    """


def counted(count: int, what: str) -> str:
    """``"1 message"``, ``"3 messages"``."""
    return f"{count} {what}{'' if count == 1 else 's'}"


def summary(entries: Iterable[tuple[int, int, int]], to: str) -> str:
    """``"rank 1 tag 7: 3 messages, 3072 bytes; ..."`` from (rank, tag, bytes) triples."""
    totals: dict[tuple[int, int], list[int]] = {}
    for rank, tag, size in entries:
        total = totals.setdefault((rank, tag), [0, 0])
        total[0] += 1
        total[1] += size
    return "; ".join(
        f"{to} rank {rank} tag {tag}: {counted(count, 'message')}, {size} bytes"
        for (rank, tag), (count, size) in sorted(totals.items())
    )


class Leaving:
    """The finalize half of :class:`pmca.p2p.P2p`: LEAVE, LEAVE_ACK, and the reports."""

    _bml: Bml
    _peers: list[BmlPeer]
    _log: FilteringBoundLogger
    _tag: int
    _seq_in: list[int]
    _seq_out: list[int]
    _pending: dict[int, Request]
    _fragments: dict[int, Fragments]
    _posted: Posted[Request]
    _unexpected: Unexpected[Incoming]
    _sends: dict[int, Request]
    _finish: Callable[..., None]
    _control_to: Callable[..., None]
    wait_for: Callable[..., None]

    def _init_leaving(self) -> None:
        #: Peers whose LEAVE took effect, with the error what names them now gets.
        self.gone: dict[int, PeerFinalized] = {}
        #: LEAVE / LEAVE_ACK that came ahead of a message sent before them, per source.
        self._early: dict[int, list[tuple[int, int, int]]] = {}
        #: Peers this rank told it leaves, and those that acknowledged.
        self._told: set[int] = set()
        self._acked: set[int] = set()
        #: Peers given up on: this rank's data did not reach them within the bound.
        self._abandoned: set[int] = set()
        #: Per peer: LEAVE and LEAVE_ACK messages not yet handed to the transport.
        self._unhanded: dict[int, int] = {}
        #: Peers a LEAVE or LEAVE_ACK to was dropped from a btl's queue, never sent.
        self._unsent: set[int] = set()
        #: Per peer: rendezvous reads from it under way (their FIN is still to go).
        self._reading: dict[int, int] = {}
        #: Peers whose LEAVE waits for those reads (with the LEAVE's flags).
        self._deferred: dict[int, int] = {}
        #: Peers this rank's LEAVE went to: it reads nothing more from them.
        self._said: set[int] = set()
        #: What finalize could not deliver or saw never received, said once at the end.
        self._reports: list[str] = []
        #: Peers whose queued messages the btls dropped, and the completed
        #: messages among them (rank, tag, bytes): not delivered, and never will be.
        self._dropped: set[int] = set()
        self._held: list[tuple[int, int, int]] = []

    # -- receiving -------------------------------------------------------------

    def _leave_message(self, source: int, data: memoryview) -> None:
        kind, flags, seq = proto.LEAVE_MSG.unpack_from(data)
        if seq != self._seq_in[source]:
            self._early.setdefault(source, []).append((kind, flags, seq))
            return
        self._leave_effect(source, kind, flags)

    def _check_early(self) -> None:
        """Apply the LEAVE / LEAVE_ACK whose earlier messages have now all arrived."""
        for source, waiting in list(self._early.items()):
            for entry in [e for e in waiting if e[2] == self._seq_in[source]]:
                waiting.remove(entry)
                self._leave_effect(source, entry[0], entry[1])
            if not waiting:
                del self._early[source]

    def _leave_effect(self, source: int, kind: int, flags: int) -> None:
        if kind == proto.LEAVE_ACK:
            self._acked.add(source)
            # It owes this rank nothing more: its closing now is an orderly end.
            self._bml.departed.add(source)
            return
        after_error = bool(flags & proto.LEAVE_AFTER_ERROR)
        why = " after an error" if after_error else ""
        gone = PeerFinalized(
            f"rank {source} finalized its session{why}: it sends and receives nothing more",
            rank=source,
            after_error=after_error,
        )
        self.gone[source] = gone
        self._bml.departed.add(source)
        self._say(source, proto.LEAVE_ACK, 0)
        for request in [r for r in self._posted if r.peer == source]:
            self._posted.remove(request)
            self._finish(request, 0, gone)
        # Its FINs and clear-to-sends came before this LEAVE, on the same route:
        # a rendezvous send still waiting for one will never get it.
        for request in [r for r in self._sends.values() if r.peer == source]:
            self._finish(request, 0, self._unanswered(request))
        self._log.info("peer finalized", rank=source, after_error=after_error)

    def _unanswered(self, request: Request) -> PeerFinalized:
        """The error of a rendezvous send whose receiver finalized without answering it."""
        gone = self.gone[request.peer]
        why = " after an error" if gone.after_error else ""
        return PeerFinalized(
            f"rank {request.peer} finalized its session{why} without receiving this message "
            f"(tag {request.tag}, {request.view.nbytes} bytes)",
            rank=request.peer,
            after_error=gone.after_error,
        )

    def _say(self, rank: int, kind: int, flags: int) -> None:
        """Send LEAVE or LEAVE_ACK to ``rank`` behind its data; count it until handed over."""
        if kind == proto.LEAVE:
            self._said.add(rank)
        unhanded = self._unhanded
        unhanded[rank] = unhanded.get(rank, 0) + 1

        def handed(error: BaseException | None) -> None:
            left = unhanded.get(rank, 0) - 1
            if left > 0:
                unhanded[rank] = left
            else:
                unhanded.pop(rank, None)
            if error is not None:  # dropped (or its connection lost): never handed over
                self._unsent.add(rank)

        self._control_to(rank, proto.LEAVE_MSG.pack(kind, flags, self._seq_out[rank]), handed)

    # -- rendezvous reads --------------------------------------------------------

    def _read_started(self, source: int) -> None:
        """A rendezvous read from ``source`` began: this rank's LEAVE to it waits."""
        self._reading[source] = self._reading.get(source, 0) + 1

    def _read_finished(self, source: int, fin: bytes) -> bool:
        """Answer ``fin`` for a read from ``source`` that ended, then say a LEAVE that
        waited for it; ``False`` (nothing sent) when the LEAVE went first (finalize
        stopped waiting): the sender failed that send already."""
        left = self._reading.get(source, 0) - 1
        if left > 0:
            self._reading[source] = left
        else:
            self._reading.pop(source, None)
        if source in self._said:
            return False
        self._control_to(source, fin)
        if left <= 0 and source in self._deferred:
            self._say(source, proto.LEAVE, self._deferred.pop(source))
        return True

    # -- finalize ---------------------------------------------------------------

    def leave(self, *, after_error: bool, drain: float, barrier: float) -> None:
        """Tell every peer this rank leaves; deliver, wait for their word, report.

        ``drain`` bounds the wait for this rank's own sends (the finalize
        timeout); ``barrier`` the wait for the peers' acknowledgements
        (``drain`` instead after an error).
        """
        started = time.monotonic()
        me = self._bml.world.rank
        with self._bml.lock:
            flags = proto.LEAVE_AFTER_ERROR if after_error else 0
            for peer in self._peers:
                reached = peer.send and peer.failed is None
                if reached and peer.rank != me and peer.rank not in self.gone:
                    self._told.add(peer.rank)
                    if self._reading.get(peer.rank):
                        self._deferred[peer.rank] = flags  # said behind the reads' FINs
                    else:
                        self._say(peer.rank, proto.LEAVE, flags)
            for _ in range(_SELF_ROUNDS):  # what this rank sent itself, matched or not
                if not self._bml.progress():
                    break
            # Nobody will ever receive what this rank still sends itself.
            self._drop_backlog(
                self._give_up(lambda r: r.peer == me, "this rank finalized before receiving it")
            )
        self._wait(self._drained, drain)
        with self._bml.lock:
            if not self._drained():
                deferred, self._deferred = self._deferred, {}
                for rank, deferred_flags in deferred.items():  # reads not done: leave anyway
                    self._say(rank, proto.LEAVE, deferred_flags)
                # Peers that did not take this rank's data within the bound are not
                # waited for any longer: finalize returns within it for them.
                self._abandoned = {
                    rank
                    for rank in self._stuck()
                    if rank in self._told and not self._peer_done(rank)
                }
                given_up = self._give_up(
                    lambda r: True,
                    f"not delivered within {drain:g} s (pmca_base_finalize_timeout)",
                )
                # At once, under the same lock: what was just said not delivered
                # must never go out later (the peer may start reading any time).
                self._drop_backlog(given_up - self._abandoned)
                self._drop_backlog(self._abandoned, report=False)  # said with their report
        bound = drain if after_error else barrier
        settled = self._wait(self._settled, max(0.0, started + bound - time.monotonic()))
        if self._abandoned:
            self._report_unacknowledged(
                self._abandoned, f"{drain:g} s (pmca_base_finalize_timeout)"
            )
        if not settled:
            setting = "pmca_base_finalize_timeout" if after_error else "pmca_base_modex_timeout"
            with self._bml.lock:
                silent = {r for r in self._told if not self._peer_done(r)}
            self._report_unacknowledged(silent, f"{bound:g} s ({setting})")
        self._report_unreceived()

    def _stuck(self) -> set[int]:
        """Live peers this rank still has sends pending to, or a LEAVE queued for."""
        peers = self._peers
        pending = {r.peer for r in self._pending.values() if r.kind == "send" and not r.done}
        return {r for r in pending | set(self._unhanded) if peers[r].failed is None}

    def _wait(self, condition: Callable[[], bool], timeout: float) -> bool:
        """Progress until ``condition()``; ``False`` when ``timeout`` passed first."""
        try:
            self.wait_for(condition, timeout)
        except TimeoutError:
            return False
        except BtlError as exc:  # a btl's own trouble: finalize goes on and says so
            self._log.warning("finalize: progress failed", why=str(exc))
            return condition()
        return True

    def _drained(self) -> bool:
        """Every send of this rank finished and its LEAVEs are with the transport."""
        with self._bml.lock:
            self._check_early()
            if self._fragments or self._waiting_transport():
                return False
            if any(self._peers[rank].failed is None for rank in self._deferred):
                return False  # a LEAVE waits for a read's FIN
            return not any(
                r.kind == "send" and self._peers[r.peer].failed is None
                for r in self._pending.values()
            )

    def _peer_done(self, rank: int) -> bool:
        return (
            self._peers[rank].failed is not None or rank in self._acked or rank in self._abandoned
        )

    def _settled(self) -> bool:
        """Every peer told acknowledged (with all it sent before), or failed."""
        with self._bml.lock:
            self._check_early()
            return not self._waiting_transport() and all(self._peer_done(r) for r in self._told)

    def _waiting_transport(self) -> bool:
        """A LEAVE or LEAVE_ACK to a live peer is still queued in a btl (behind data)."""
        return any(
            self._peers[rank].failed is None and rank not in self._abandoned
            for rank in self._unhanded
        )

    def _give_up(self, which: Callable[[Request], bool], why: str) -> set[int]:
        """Fail the sends ``which`` selects, and say once what they were; their peers."""
        dropped = [
            r
            for r in self._pending.values()
            if r.kind == "send" and not r.done and which(r) and self._peers[r.peer].failed is None
        ]
        if not dropped:
            return set()
        sends = summary(((r.peer, r.tag, r.view.nbytes) for r in dropped), "to")
        error = BtlError(f"p2p finalize: a send was dropped: {why}")
        for request in dropped:
            self._finish(request, 0, error)
        self._reports.append(f"{counted(len(dropped), 'send')} not delivered ({why}): {sends}")
        return {r.peer for r in dropped}

    def _drop_backlog(self, ranks: set[int], *, report: bool = True) -> None:
        """Have the btls drop what they still queue to ``ranks`` (their optional
        ``drop_queued``), so that nothing said not delivered arrives later, and
        count the completed messages among it as not delivered: said here
        (``report``), or with the peer's own report. The first time per peer
        only: what a btl queues to it afterwards is control traffic.

        A btl without ``drop_queued`` can only be asked what it holds
        (``queued_sends``); it may still send that later.
        """
        held: list[tuple[int, int, int]] = []
        for rank in sorted(ranks - self._dropped):
            self._dropped.add(rank)
            for module in self._bml.modules:
                drop = getattr(module, "drop_queued", None)
                if drop is None:
                    drop = getattr(module, "queued_sends", None)
                if drop is not None:
                    held.extend(self._completed_messages(drop(rank)))
        self._held.extend(held)
        if report and held:
            self._reports.append(
                f"{counted(len(held), 'message')} not delivered (completed, still queued in a "
                f"btl): {summary(held, 'to')}"
            )

    def _report_unacknowledged(self, ranks: set[int], waited: str) -> None:
        """Say once which peers never confirmed they have all of this rank's data, and
        what the btls still held for them (where a btl can tell, ``queued_sends``)."""
        with self._bml.lock:
            silent = sorted(ranks)
            self._drop_backlog(set(silent), report=False)
            held = [h for h in self._held if h[0] in silent]
            unsent = sorted(r for r in silent if r in self._unhanded or r in self._unsent)
        queued = (
            f"{counted(len(held), 'message')} not delivered (completed, still queued in a btl): "
            f"{summary(held, 'to')}"
            if held
            else "no btl that can tell holds messages for them"
        )
        if unsent:
            behind = ", ".join(map(str, unsent))
            queued += f"; this rank's LEAVE to rank(s) {behind} was still queued behind data"
        self._reports.append(
            f"rank(s) {', '.join(map(str, silent))} did not acknowledge that this rank left "
            f"within {waited}: what it sent them last may not have arrived, and what they "
            f"send it now is lost; {queued}"
        )

    def _completed_messages(self, queued: Iterable[QueuedSend]) -> list[tuple[int, int, int]]:
        """(rank, tag, bytes) of the completed p2p messages among what a btl queued."""
        found: list[tuple[int, int, int]] = []
        for entry in queued:
            head = bytes(entry.head)
            if entry.tag != self._tag or len(head) < _MATCH_SIZE:
                continue
            if not getattr(entry, "completed", True):
                continue  # its request is pending: named among the sends not delivered
            kind, _flags, _seq, tag, size = proto.MATCH.unpack_from(head)
            # An RGET/RNDV header goes out without a callback, so a btl calls
            # it completed, but its request is pending and named with those.
            if kind == proto.EAGER:
                found.append((entry.rank, tag, size))
        return found

    def _report_unreceived(self) -> None:
        """Say once which messages arrived and no receive ever took."""
        with self._bml.lock:
            waiting = [(m.source, m.tag, m.size) for m in self._unexpected_entries()]
        if waiting:
            verb = "was" if len(waiting) == 1 else "were"
            self._reports.append(
                f"{counted(len(waiting), 'message')} arrived and {verb} never received: "
                f"{summary(waiting, 'from')}"
            )

    def _say_reports(self) -> None:
        """Warn once per finding (:class:`FinalizeWarning`); nothing here can raise."""
        reports, self._reports = self._reports, []
        for report in reports:
            self._log.info("finalize", report=report)
            me = self._bml.world.rank
            warning = FinalizeWarning(f"pmca p2p finalize (rank {me}): {report}")
            try:
                warn_user(warning)
            except Exception as exc:  # warnings turned into errors: finalize still completes
                self._log.error("finalize", report=report, warning_failed=repr(exc))

    def _unexpected_entries(self) -> list[Incoming]:
        return [entry for queue in self._unexpected.streams.values() for entry in queue]
