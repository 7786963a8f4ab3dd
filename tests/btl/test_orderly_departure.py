"""A peer that leaves in order is not reported as failed, at the default verbosity.

Three processes over a test socket world. Rank 0 finalizes first and waits
for rank 1's acknowledgement, which comes late (rank 1 computes without
calling pmca). Rank 2 acknowledges at once, finalizes (waiting for rank 1
at most its own 1 s) and closes its connections: to rank 0 it owed nothing
more, having acknowledged that rank 0 left. Before, rank 0, still
progressing for rank 1, logged ``error: peer failed rank=2 ... closed the
connection`` for that orderly departure (issue 40).
"""

from __future__ import annotations

import json
import textwrap
from pathlib import Path

import pytest

from ._pairs import BTLS, run_ranks

_RANK = textwrap.dedent(
    """
    import json, sys, time
    from pathlib import Path
    sys.path.insert(0, {root!r})
    import pmca
    from tests.btl.sm._world import SocketWorld

    rank, path, btl = int(sys.argv[1]), sys.argv[2], sys.argv[3]
    world = SocketWorld(rank, 3, path)
    # rank 2 waits for rank 1's acknowledgement 1 s at most; rank 0 long enough
    bound = {{0: 60, 1: 60, 2: 1}}[rank]
    mca = {{"btl": btl, "btl_tcp_if_include": "127.0.0.1/8", "pmca_base_modex_timeout": bound}}
    try:
        with pmca.Session(mca=mca, frameworks=["btl"], world=world) as s:
            for peer in range(3):  # every pair used once
                if peer != rank:
                    s.p2p.send(peer, 1, b"hello")
            for peer in range(3):
                if peer != rank:
                    s.p2p.recv(peer, 1, bytearray(5), timeout=60)
            world.barrier()
            if rank == 1:
                time.sleep(3.0)  # computing: acknowledges nobody meanwhile
            elif rank == 2:
                deadline = time.monotonic() + 60
                try:  # until rank 0's LEAVE came (and was acknowledged)
                    while time.monotonic() < deadline:
                        s.p2p.iprobe(0, 2)
                except pmca.btl.PeerFinalized:
                    pass
        print(json.dumps({{"rank": rank, "done": True}}), flush=True)
    finally:
        world.close()
    """
)


@pytest.mark.parametrize("btl", BTLS)
def test_a_peer_that_acknowledged_this_rank_leaving_then_closes_is_no_error(
    pmca_env, tmp_path, btl
) -> None:
    script = tmp_path / "rank.py"
    script.write_text(_RANK.format(root=str(Path(__file__).resolve().parents[2])))
    results = run_ranks(script, 3, str(tmp_path / "world.sock"), btl)
    for number, (returncode, stdout, stderr) in enumerate(results):
        assert returncode == 0 and json.loads(stdout)["done"], (number, stdout, stderr)
    stderr = results[0][2]
    assert "error" not in stderr and "peer failed" not in stderr, stderr
