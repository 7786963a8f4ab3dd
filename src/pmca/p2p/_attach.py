"""A session's data path: the modex, the bml and p2p, made at init and undone at finalize."""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..btl import TAG_P2P_FIRST, TAG_P2P_LAST, BtlError
from ..btl.base import BtlBase
from ..btl.bml import Bml, connect
from ._engine import P2p
from ._idle import should_yield

if TYPE_CHECKING:
    from ..mca._open import OpenFramework
    from ..world import World


class DataPath:
    """What ``Session(world=...)`` builds when the btl framework is open."""

    def __init__(self, bml: Bml, p2p: P2p, tag: int) -> None:
        self.bml = bml
        self.p2p = p2p
        self.tag = tag

    def close(self, timeout: float) -> None:
        """Finish or fail traffic in flight, then forget the peers."""
        try:
            self.p2p.close(timeout)
            if not any(peer.failed for peer in self.bml.peers):
                # Nobody closes a connection while a peer may still read from it.
                self.bml.world.barrier(timeout=timeout)
        finally:
            self.bml.close()
            _tags_in_use.discard(self.tag)


def _free_tag(taken: set[int]) -> int:
    for tag in range(TAG_P2P_FIRST, TAG_P2P_LAST + 1):
        if tag not in taken:
            return tag
    raise BtlError(
        f"more than {TAG_P2P_LAST - TAG_P2P_FIRST + 1} sessions with a world are alive at once"
    )


_tags_in_use: set[int] = set()


def attach(btl: OpenFramework, world: World, timeout: float) -> DataPath:
    """Exchange addresses over ``world`` (one allgather) and connect every btl module.

    Sessions with a world take active-message tags in creation order, so
    every rank must create them in the same order (as with MPI communicators).
    """
    base = btl.base
    modules = base.modules() if isinstance(base, BtlBase) else []
    log = btl.log.bind(component="bml")
    bml = connect(world, modules, log, timeout)
    tag = _free_tag(_tags_in_use)
    try:
        p2p = P2p(bml, tag, log.bind(component="p2p"))
    except BaseException:
        bml.close()
        raise
    _tags_in_use.add(tag)
    params = btl.host.params
    p2p.spin = float(params.value("btl_base_wait_spin"))
    me = bml.peers[world.rank]
    local_ranks = sum(1 for peer in bml.peers if peer.host == me.host)
    p2p.yield_when_idle = should_yield(int(params.value("mpi_yield_when_idle")), local_ranks)
    return DataPath(bml, p2p, tag)
