"""Run under ``mpirun -n 2``: btl self,ofi over one provider, sizes, put/get, checksums.

Prints one ``RESULT <json>`` line per rank. The world (modex) is mpi4py's
COMM_WORLD; every byte of data moves through pmca's ofi module.
"""

from __future__ import annotations

import ctypes
import json
import random
import sys
import zlib
from typing import Any

from mpi4py import MPI

import pmca
from pmca.runtime import RUNTIME

SIZES = (0, 1, 4095, 16 * 1024, 64 * 1024 + 3, 1 << 20, 64 << 20)
RMA_SIZE = (4 << 20) + 123


def pattern(seed: int, size: int) -> bytes:
    return random.Random(seed).randbytes(size)


def ping_pong(session: pmca.Session, me: int, peer: int) -> list[int]:
    done = []
    for size in SIZES:
        mine, theirs = pattern(me * 1000 + size, size), pattern(peer * 1000 + size, size)
        out = bytearray(size)
        request = session.p2p.irecv(peer, 3, out)
        session.p2p.send(peer, 3, mine)
        request.wait(timeout=120)
        if zlib.crc32(out) != zlib.crc32(theirs):
            raise AssertionError(f"{size}-byte message from rank {peer}: checksum mismatch")
        done.append(size)
    return done


def barrier(module: Any, comm: MPI.Comm) -> None:
    request = comm.Ibarrier()
    while not request.Test():
        module.progress()


def put_get(module: Any, comm: MPI.Comm, me: int, peer: int) -> dict[str, bool]:
    """Put mine into the peer's target; get the peer's source into mine; compare."""
    source = ctypes.create_string_buffer(pattern(me, RMA_SIZE), RMA_SIZE)
    target = ctypes.create_string_buffer(RMA_SIZE)
    fetched = bytearray(RMA_SIZE)
    handles = [module.register_mem(None, ctypes.addressof(b), RMA_SIZE) for b in (source, target)]
    offered = (
        ctypes.addressof(source),
        handles[0].packed,
        ctypes.addressof(target),
        handles[1].packed,
    )
    theirs = comm.allgather(offered)[peer]
    endpoint = module.endpoint(peer)
    errors: list[BaseException | None] = []
    module.put(
        endpoint, memoryview(source).cast("B"), handles[0], theirs[2], theirs[3], errors.append
    )
    module.get(endpoint, memoryview(fetched), None, theirs[0], theirs[1], errors.append)
    while len(errors) < 2:
        module.progress()
    # The peer's put into my target and get from my source are done too. Keep
    # progressing meanwhile: with manual progress the target of a read or
    # write serves it from its own progress calls.
    barrier(module, comm)
    expected = pattern(peer, RMA_SIZE)
    result = {
        "completed": errors == [None, None],
        "put_landed": target.raw == expected,
        "get_read": bytes(fetched) == expected,
    }
    barrier(module, comm)
    for handle in handles:
        module.deregister_mem(handle)
    return result


def main(provider: str) -> None:
    comm = MPI.COMM_WORLD
    me, peer = comm.rank, 1 - comm.rank
    mca = {"btl": "self,ofi", "btl_ofi_provider_include": provider}
    with pmca.Session(mca=mca, world=pmca.world.from_mpi(comm)) as session:
        module = next(m for m in session.modules("btl") if m.name == "ofi")
        component = next(
            lc.component for lc in RUNTIME.frameworks["btl"].selected if lc.component.name == "ofi"
        )
        sizes = ping_pong(session, me, peer)
        rma = put_get(module, comm, me, peer)
        stats = module.registrations.stats()
        report = {
            "rank": me,
            "reach": session.reach(peer),
            "provider": module.provider,
            "load_mode": [c.load_mode for c in session.components("btl") if c.name == "ofi"],
            "sizes": sizes,
            "rma": rma,
            "support": int(pmca.memory.support_level()),
            "monitor": bool(component.monitor is not None and component.monitor.imported),
            "cached": stats is not None,
            "mr_live_after": module.backend.live,
        }
        barrier(module, comm)
    print("RESULT " + json.dumps(report), flush=True)


if __name__ == "__main__":
    main(sys.argv[1])
