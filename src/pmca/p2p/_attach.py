"""A session's data path: the modex, the bml and p2p, built once and undone at finalize.

``pmca.session._data`` decides when (at init, or at first use in a world of
one rank) and owns the session's active-message tag.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..btl.base import BtlBase
from ..btl.bml import Bml, connect
from ._engine import P2p
from ._idle import should_yield

if TYPE_CHECKING:
    from ..mca._open import OpenFramework
    from ..world import World


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


def attach(btl: OpenFramework, world: World, timeout: float, tag: int) -> DataPath:
    """Exchange addresses over ``world`` (one allgather) and connect every btl module.

    ``tag`` is the session's active-message tag: sessions with a world take
    them in creation order, so every rank must create them in the same order
    (as with MPI communicators).
    """
    base = btl.base
    modules = base.modules() if isinstance(base, BtlBase) else []
    log = btl.log.bind(component="bml")
    bml = connect(world, modules, log, timeout)
    try:
        p2p = P2p(bml, tag, log.bind(component="p2p"))
    except BaseException:
        bml.close()
        raise
    params = btl.host.params
    p2p.spin = float(params.value("btl_base_wait_spin"))
    me = bml.peers[world.rank]
    local_ranks = sum(1 for peer in bml.peers if peer.host == me.host)
    p2p.yield_when_idle = should_yield(int(params.value("mpi_yield_when_idle")), local_ranks)
    return DataPath(bml, p2p)
