"""What a receiver keeps of each peer's messages: how a btl bounds it (flow control).

A message that arrives before its receive is posted is kept by the message
layer (its unexpected queue) until a receive takes it. A btl that can stop
taking input from one peer without losing any (btl ``tcp`` stops reading
that peer's socket: the kernel's buffers fill, then the sender's own queue
limit holds its sender back) bounds that memory with two optional module
operations, which the message layer calls wherever a module has them:

- ``watch_holding(holding)``, once, at the message layer's start: the
  :class:`Holding` the module asks before it stops taking a peer's input.
- ``holding_eased(rank)``: what the message layer keeps from ``rank``
  shrank, or it now waits for something from ``rank`` (a receive posted, a
  probe, a rendezvous send waiting for its answer, finalize); ``rank`` is
  ``-1`` for every peer. A module that stopped taking ``rank``'s input asks
  the holding again and takes it again when it may. The message layer calls
  it on its common paths, so it must cost next to nothing while no input is
  stopped.

A module stops taking a peer's input only while :meth:`Holding.awaits` is
false: input the receiver waits for may be behind what it holds, and
matching stays in arrival order, so a receive posted for a message behind
stopped input starts the input again rather than waiting forever.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

from .._public import public


@public
class Holding(Protocol):
    """The message layer's account of what it keeps per peer (see the module's text)."""

    #: Per peer rank: bytes of its messages the message layer keeps that no
    #: receive took yet (payload plus a fixed cost per message).
    held: Sequence[int]

    def awaits(self, rank: int) -> bool:
        """Whether the message layer waits for anything from ``rank`` now: a posted
        receive a message from it could match (``ANY_SOURCE`` included), a probe (or
        an ``iprobe`` that found nothing, until one more message from it is kept), a
        rendezvous answer, or the LEAVE of finalize."""
        ...


#: ``holding_eased``'s rank for every peer.
EVERY_PEER = -1

__all__ = ["EVERY_PEER", "Holding"]
