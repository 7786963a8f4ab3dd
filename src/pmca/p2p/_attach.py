"""A session's data path: the bml with p2p on it, built once and undone at finalize.

``pmca.session._data`` decides when (at init, or at first use in a world of
one rank), connects the btl modules (the modex and the bml) and owns the
session's active-message tag.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ._engine import P2p
from ._idle import should_yield

if TYPE_CHECKING:
    from ..btl.bml import Bml
    from ..mca._open import OpenFramework


class DataPath:
    """What ``Session(world=...)`` builds when the btl framework is open."""

    def __init__(self, bml: Bml, p2p: P2p) -> None:
        self.bml = bml
        self.p2p = p2p

    def close(
        self, timeout: float, *, after_error: bool = False, finalize_timeout: float | None = None
    ) -> None:
        """Leave: deliver or fail traffic in flight, hear every peer out, then forget them.

        No launcher barrier: the LEAVE exchange runs over the btls, behind
        the data (see :mod:`pmca.p2p._leaving`), so nobody closes a
        connection while a peer may still read from it.
        """
        try:
            self.p2p.close(timeout, after_error=after_error, finalize_timeout=finalize_timeout)
        finally:
            self.bml.close()


def attach(btl: OpenFramework, bml: Bml, tag: int) -> DataPath:
    """The message layer on ``bml`` (the btl modules already connected to the world).

    ``tag`` is the session's active-message tag: sessions with a world take
    them in creation order, so every rank must create them in the same order
    (as with MPI communicators). If the message layer cannot be built, the
    bml is closed.
    """
    try:
        p2p = P2p(bml, tag, btl.log.bind(component="p2p"))
        params = btl.host.params
        p2p.spin = float(params.value("btl_base_wait_spin"))
        me = bml.peers[bml.world.rank]
        local_ranks = sum(1 for peer in bml.peers if peer.host == me.host)
        p2p.yield_when_idle = should_yield(int(params.value("mpi_yield_when_idle")), local_ranks)
    except BaseException:
        bml.close()
        raise
    return DataPath(bml, p2p)
