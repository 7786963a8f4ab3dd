"""How p2p uses the routes the bml found: lanes per peer, stripes of a large get."""

from __future__ import annotations

from ..btl.bml import Bml, Route
from ._blocking import Lane


def open_lanes(bml: Bml, am_tag: int) -> dict[int, Lane]:
    """Each peer's lane, where the btl of its eager route offers one."""
    lanes: dict[int, Lane] = {}
    for peer in bml.peers:
        if peer.rank == bml.world.rank or not peer.send:
            continue
        route = peer.send[0]
        open_lane = getattr(route.module, "open_lane", None)
        lane = open_lane(route.endpoint, am_tag) if open_lane is not None else None
        if lane is not None:
            lanes[peer.rank] = lane
    return lanes


def rendezvous_lanes(bml: Bml, lanes: dict[int, Lane]) -> dict[int, Lane]:
    """The lanes that may carry a rendezvous: they can (:attr:`Lane.rendezvous`),
    and their btl is the peer's only RDMA route (so the one handle the lane
    sends is all the receiver may read through)."""
    return {
        rank: lane
        for rank, lane in lanes.items()
        if lane.rendezvous
        and len(rdma := bml.peers[rank].rdma) == 1
        and rdma[0][0].module is bml.peers[rank].send[0].module
    }


def stripes(
    routes: list[tuple[Route, float]], size: int, granule: int = 1 << 16
) -> list[tuple[Route, int, int]]:
    pieces: list[tuple[Route, int, int]] = []
    offset = 0
    for index, (route, weight) in enumerate(routes):
        length = (
            size - offset if index == len(routes) - 1 else int(size * weight) // granule * granule
        )
        limit = route.module.limits.get_limit or length
        while length > 0:
            chunk = min(length, limit)
            pieces.append((route, offset, chunk))
            offset += chunk
            length -= chunk
    return pieces


__all__ = ["open_lanes", "rendezvous_lanes", "stripes"]
