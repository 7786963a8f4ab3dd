"""Large messages striped across two btls of equal exclusivity, by bandwidth."""

from __future__ import annotations

import socket
import textwrap

import pytest

import pmca
from pmca.btl import FRAMEWORK
from pmca.testing import run_pair
from pmca.world import PairWorld

_SIDE = textwrap.dedent(
    """
    import hashlib, socket, sys
    import pmca
    from pmca.world import PairWorld

    MCA = {mca!r}

    def run(fd, rank):
        world = PairWorld(socket.socket(fileno=fd), rank)
        with pmca.Session(mca=MCA, frameworks=["btl"], world=world) as s:
            peer = 1 - rank
            rdma = [route.name for route, _ in s._data_path().bml.peer(peer).rdma]
            data = bytes(range(256)) * (24 << 12)  # 24 MiB
            out = bytearray(len(data))
            request = s.p2p.irecv(peer, 1, out)
            s.p2p.send(peer, 1, data)
            request.wait(timeout=120)
            assert out == data, "striped message corrupted"
            return rdma

    if __name__ == "__main__":
        print(run(int(sys.argv[1]), 1))
    """
)


@pytest.mark.skipif(
    not any(ref.name == "sm" for ref in FRAMEWORK.static_components), reason="needs btl sm"
)
def test_equal_exclusivity_stripes_across_sm_and_tcp(pmca_env, tmp_path) -> None:
    mca = {
        "btl": "self,sm,tcp",
        "btl_tcp_exclusivity": 65535,
        "btl_tcp_latency": 1,
        "pmca_base_modex_timeout": 60,
    }
    rdma, out = run_pair(_SIDE.format(mca=mca), tmp_path)
    assert sorted(rdma) == ["sm", "tcp"], rdma
    assert "sm" in out and "tcp" in out


def test_pair_world_names_a_silent_peer() -> None:
    a, b = socket.socketpair()
    world = PairWorld(a, 0)
    with pytest.raises(pmca.world.WorldTimeout, match=r"nothing from rank 1 within 0\.2 s"):
        world.allgather(b"x", timeout=0.2)
    b.close()
