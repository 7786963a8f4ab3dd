"""btl per-peer pvars count exactly what two processes sent each other."""

from __future__ import annotations

import json
import textwrap
from typing import Any

import pytest

from pmca.btl import FRAMEWORK
from pmca.scenarios.ompi_13021 import ofi_unavailable
from pmca.testing import run_pair

N = 37
B = 1000

_SIDE = textwrap.dedent(
    """
    import json, socket, sys, time
    import pmca
    from pmca.btl import TAG_USER
    from pmca.world import PairWorld

    MCA = {mca!r}
    N, B = {n}, {b}

    def run(fd, rank):
        world = PairWorld(socket.socket(fileno=fd), rank)
        with pmca.Session(mca=MCA, frameworks=["btl"], world=world) as s:
            peer = 1 - rank
            bml = s._data_path().bml
            route = bml.peer(peer).send[0]
            module, name = route.module, route.name
            got = []
            module.register_recv(TAG_USER, lambda ep, tag, data: got.append(data.nbytes))

            def exchange(count, parts):
                del got[:]
                for _ in range(count):
                    module.send(route.endpoint, TAG_USER, parts)
                deadline = time.monotonic() + 60
                while len(got) < count and time.monotonic() < deadline:
                    bml.progress()
                world.allgather(b"", timeout=60)
                return list(got)

            # Traffic before the pvar session: it must not show in its handles.
            exchange(5, [bytes(100)])
            ps = s.pvar_session()
            names = [f"btl_{{name}}_{{what}}" for what in
                     ("bytes_sent", "messages_sent", "bytes_received", "messages_received")]
            handles = {{n: ps.handle(n, obj=peer) for n in names}}
            # Rank 1 sends each message in two parts: the count is of the whole.
            parts = [bytes(B)] if rank == 0 else [bytes(B // 2), bytearray(B - B // 2)]
            got_sizes = exchange(N, parts)
            values = {{n: h.read() for n, h in handles.items()}}
            swept = dict(zip(names, ps.read_all()))
            again = handles[names[0]].readreset()
            after = handles[names[0]].read()
            return {{"btl": name, "values": values, "swept": swept, "readreset": again,
                     "after": after,
                     "got": got_sizes}}

    if __name__ == "__main__":
        print(json.dumps(run(int(sys.argv[1]), 1)))
    """
)


def _pair(tmp_path: Any, mca: dict[str, Any]) -> tuple[dict[str, Any], dict[str, Any]]:
    mine, out = run_pair(_SIDE.format(mca=mca, n=N, b=B), tmp_path)
    return mine, json.loads(out.strip().splitlines()[-1])


def _has_sm() -> bool:
    return any(ref.name == "sm" for ref in FRAMEWORK.static_components)


_BTLS = [
    pytest.param({"btl": "self,tcp"}, "tcp", id="tcp"),
    pytest.param(
        {"btl": "self,sm"},
        "sm",
        id="sm",
        marks=pytest.mark.skipif(not _has_sm(), reason="needs btl sm"),
    ),
    pytest.param(
        {"btl": "self,ofi", "btl_ofi_provider_include": "tcp"},
        "ofi",
        id="ofi",
        marks=pytest.mark.skipif(ofi_unavailable() is not None, reason="needs libfabric"),
    ),
]


@pytest.mark.parametrize(("mca", "btl"), _BTLS)
def test_btl_counters_equal_what_was_sent(pmca_env, tmp_path, mca, btl) -> None:
    mca = {**mca, "pmca_base_modex_timeout": 60}
    rank0, rank1 = _pair(tmp_path, mca)
    for side in (rank0, rank1):
        assert side["btl"] == btl
        assert side["got"] == [B] * N
        values = side["values"]
        # Exactly the N messages of B bytes each way: the earlier p2p traffic
        # happened before the pvar session and is not counted.
        assert values[f"btl_{btl}_bytes_sent"] == N * B, values
        assert values[f"btl_{btl}_messages_sent"] == N, values
        assert values[f"btl_{btl}_bytes_received"] == N * B, values
        assert values[f"btl_{btl}_messages_received"] == N, values
        # A sweep of the session reads what each handle reads.
        assert side["swept"] == values
        assert side["readreset"] == N * B
        assert side["after"] == 0
