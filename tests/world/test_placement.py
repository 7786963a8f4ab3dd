"""The bml takes which peers share this host from the world's launcher, when it says."""

from __future__ import annotations

import textwrap

import pytest

from pmca.btl import FRAMEWORK
from pmca.testing import run_pair

_SIDE = textwrap.dedent(
    """
    import socket, sys
    import pmca
    from pmca.world import Locality, PairWorld

    class PlacedPair(PairWorld):
        # A launcher that put the two ranks on two hosts (they share one here).
        def locality(self):
            return Locality(("node-a", "node-b"), frozenset({self.rank}))

    def run(fd, rank):
        world = PlacedPair(socket.socket(fileno=fd), rank)
        with pmca.Session(mca={"btl": "self,sm"}, frameworks=["btl"], world=world) as s:
            reach = s.reach(1 - rank)
            world.barrier(timeout=60)
            return reach

    if __name__ == "__main__":
        print(run(int(sys.argv[1]), 1))
    """
)


@pytest.mark.skipif(
    not any(ref.name == "sm" for ref in FRAMEWORK.static_components), reason="needs btl sm"
)
def test_peer_the_launcher_places_elsewhere_is_not_reached_by_sm(pmca_env, tmp_path) -> None:
    reach, out = run_pair(_SIDE, tmp_path)
    # Same host in fact (the modex's host ids are equal): only the launcher's word keeps sm out.
    assert reach == [], reach
    assert out.strip() == "[]", out
