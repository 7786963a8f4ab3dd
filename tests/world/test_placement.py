"""The bml takes which peers share this host from the world's launcher, when it says."""

from __future__ import annotations

import socket
import subprocess
import sys
import textwrap

import pytest

from pmca.btl import FRAMEWORK

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
    script = tmp_path / "side.py"
    script.write_text(_SIDE)
    parent, child_end = socket.socketpair()
    child = subprocess.Popen(
        [sys.executable, str(script), str(child_end.fileno())],
        pass_fds=[child_end.fileno()],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    child_end.close()
    namespace: dict[str, object] = {}
    exec(compile(_SIDE, str(script), "exec"), namespace)
    try:
        reach = namespace["run"](parent.detach(), 0)  # type: ignore[operator]
    finally:
        out, err = child.communicate(timeout=120)
    assert child.returncode == 0, err
    # Same host in fact (the modex's host ids are equal): only the launcher's word keeps sm out.
    assert reach == [], reach
    assert out.strip() == "[]", out
