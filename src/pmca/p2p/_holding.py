"""The message layer's side of flow control: what it keeps per peer (``pmca.btl.Holding``).

Every unexpected message counts against its source (its payload and
:data:`ENTRY_COST`) from when it is queued until a receive or a matched
probe takes it. A btl that bounds what a receiver keeps (``watch_holding``)
reads :attr:`Holding.held` before it stops a peer's input, and asks
:meth:`Holding.awaits`; it hears :meth:`Holding.eased` (its
``holding_eased``) when taking input may be due again. The common paths pay
one call per receive posted or message taken, and nothing when no btl
watches.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from ..btl import EVERY_PEER
from ._matching import ANY_SOURCE

#: What one kept message counts beyond its payload: its queue entry and
#: header (an ``Incoming`` and its bytes object, about 400 bytes on CPython
#: 3.11), so a flood of empty messages is bounded too.
ENTRY_COST = 512


class HeldMessages:
    """Per-source bytes of unexpected messages, and what the receiver waits for."""

    _closed: bool
    _pending: dict[int, Any]
    _sends: dict[int, Any]

    def _init_holding(self, size: int, modules: Iterable[Any]) -> None:
        #: Per source rank: bytes of unexpected messages kept (see the module's text).
        self.held = [0] * size
        #: The most any one source had kept at once (tests and reports).
        self.held_peak = 0
        #: Probes waiting, by source (``ANY_SOURCE`` included).
        self._probing: dict[int, int] = {}
        #: Sources an ``iprobe`` missed since their last message was kept: their
        #: input is due until one more message comes (a polling loop finds its own).
        self._missed: set[int] = set()
        self._watchers = [m for m in modules if getattr(m, "watch_holding", None) is not None]
        for module in self._watchers:
            module.watch_holding(self)

    def _kept(self, source: int, payload: bytes | bytearray) -> None:
        """A message from ``source`` was queued as unexpected."""
        if self._missed:
            self._missed.discard(source)
            self._missed.discard(ANY_SOURCE)
        held = self.held[source] + len(payload) + ENTRY_COST
        self.held[source] = held
        if held > self.held_peak:
            self.held_peak = held

    def _taken(self, source: int, payload: bytes | bytearray) -> None:
        """A receive (or a matched probe) took a message from ``source`` off the queue."""
        self.held[source] -= len(payload) + ENTRY_COST
        self.eased(source)

    def eased(self, rank: int) -> None:
        """Tell the watching btls that input from ``rank`` may be due (see ``Holding``)."""
        for module in self._watchers:
            module.holding_eased(EVERY_PEER if rank == ANY_SOURCE else rank)

    def awaits(self, rank: int) -> bool:
        """Whether a receive, a probe, a rendezvous answer or finalize waits for ``rank``.

        Asked only when a btl would stop ``rank``'s input (the peer holds more
        than its limit): a walk over the pending requests is cheap there.
        """
        if self._closed:
            return True  # finalize waits for every peer's LEAVE
        probing = self._probing
        if probing and (rank in probing or ANY_SOURCE in probing):
            return True
        missed = self._missed
        if missed and (rank in missed or ANY_SOURCE in missed):
            return True
        for request in self._pending.values():
            if request.kind == "recv" and request.peer in (rank, ANY_SOURCE):
                return True  # posted, or matched and reading a rendezvous
        return any(request.peer == rank for request in self._sends.values())

    def _probe_missed(self, source: int) -> None:
        """An ``iprobe``/``improbe`` found nothing: the next progress reads ``source``."""
        self._missed.add(source)
        self.eased(source)

    def _probe_started(self, source: int) -> None:
        self._probing[source] = self._probing.get(source, 0) + 1
        self.eased(source)

    def _probe_ended(self, source: int) -> None:
        left = self._probing[source] - 1
        if left:
            self._probing[source] = left
        else:
            del self._probing[source]


__all__ = ["ENTRY_COST", "HeldMessages"]
