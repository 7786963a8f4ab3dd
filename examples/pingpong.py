"""Ping-pong between ranks 0 and 1 over each btl: 8-byte latency and bandwidth.

    mpirun -n 2 python examples/pingpong.py       (as root: --allow-run-as-root)
    mpiexec -n 2 python examples/pingpong.py      (MPICH)
    python examples/pingpong.py                   (one process: the self btl)

Each btl that reaches rank 1 from rank 0 gets its own session with
``btl = self,<name>``, so the numbers are that transport's alone.

Needs mpi4py: ``pip install 'pmca[mpi]'`` (mpi4py, numpy and Open MPI's
mpirun); without it the example says so and exits 1.
"""

# needs: mpi4py from pmca[mpi]

from __future__ import annotations

import sys
import time

import pmca

try:
    from mpi4py import MPI
except ModuleNotFoundError as missing:
    sys.exit(f"pingpong.py needs {missing.name}: pip install 'pmca[mpi]'")

ROUNDS = 500
SIZES = [1 << 10, 64 << 10, 1 << 20, 16 << 20]


def pingpong(p2p, peer: int, size: int, rounds: int) -> float:
    """Seconds per one-way trip of ``size`` bytes."""
    buf, out = bytearray(size), bytearray(size)
    if peer == p2p.rank:  # one process: receive posted first, or a large send waits forever

        def trip():
            request = p2p.irecv(peer, 1, out)
            p2p.send(peer, 1, buf)
            request.wait()
            request = p2p.irecv(peer, 1, buf)
            p2p.send(peer, 1, out)
            request.wait()
    elif p2p.rank == 0:

        def trip():
            p2p.send(peer, 1, buf)
            p2p.recv(peer, 1, out)
    else:

        def trip():
            p2p.recv(peer, 1, buf)
            p2p.send(peer, 1, buf)

    trip()  # warm up: connections, registration
    start = time.perf_counter()
    for _ in range(rounds):
        trip()
    return (time.perf_counter() - start) / (2 * rounds)


def measure(btl: str, world) -> None:
    with pmca.Session(mca={"btl": btl}, world=world) as s:
        peer = 1 - world.rank if world.size > 1 else 0
        name = s.reach(peer)[0]
        latency = pingpong(s.p2p, peer, 8, ROUNDS)
        rates = [
            size / pingpong(s.p2p, peer, size, max(4, ROUNDS * 1024 // size)) for size in SIZES
        ]
    if world.rank == 0:
        bandwidth = "  ".join(
            f"{size >> 10:>6} KiB {rate / 1e6:8.1f} MB/s"
            for size, rate in zip(SIZES, rates, strict=False)
        )
        print(f"{name:<5} latency {latency * 1e6:8.2f} us   {bandwidth}", flush=True)


def main() -> None:
    comm = MPI.COMM_WORLD
    if comm.Get_size() > 2:
        raise SystemExit("run pingpong.py on 1 or 2 ranks")
    world = pmca.world.from_mpi(comm)
    if world.size == 1:
        measure("self", world)
        return
    with pmca.Session(world=world) as s:
        names = s.reach(1 - world.rank)  # every btl reaching the peer, best first
    for name in names:
        measure(f"self,{name}", world)


if __name__ == "__main__":
    main()
