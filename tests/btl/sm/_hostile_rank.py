"""One rank of a 2-rank ping-pong over btl/sm whose segment another process overwrites.

Run under mpirun by test_hostile_writer.py: ``_hostile_rank.py WORKDIR``.
Each rank publishes ``pid fd size`` of its segment in WORKDIR/rank<N>, ping-pongs
a while, waits (idle) for WORKDIR/corrupted (the test writes into rank 1's
segment meanwhile), then ping-pongs again and writes what happened to
WORKDIR/result<N>: ``<seconds> ok`` or ``<seconds> <exception type>: <message>``.
"""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path

from mpi4py import MPI

import pmca

#: Each send and receive: an error must come before this, from the btl.
TIMEOUT = 10.0
ROUNDS = 2500  # more than twice the FIFO's 1024 cells: every cell is used again


def main() -> None:
    workdir = Path(sys.argv[1])
    comm = MPI.COMM_WORLD
    rank = comm.Get_rank()
    session = pmca.Session(mca={"btl": "self,sm"}, world=pmca.world.from_mpi(comm)).init()
    sm = next(module for module in session.modules("btl") if module.name == "sm")
    address = sm.transport.address
    (workdir / f"rank{rank}.tmp").write_text(f"{os.getpid()} {address.fd} {address.size}")
    (workdir / f"rank{rank}.tmp").rename(workdir / f"rank{rank}")
    p2p = session.p2p
    into = bytearray(8)

    def exchange(i: int) -> None:
        if rank == 0:
            p2p.send(1, 1, i.to_bytes(8, "little"), timeout=TIMEOUT)
            p2p.recv(1, 1, into, timeout=TIMEOUT)
        else:
            p2p.recv(0, 1, into, timeout=TIMEOUT)
            p2p.send(0, 1, bytes(into), timeout=TIMEOUT)

    for i in range(20):
        exchange(i)
    (workdir / f"idle{rank}").touch()
    deadline = time.monotonic() + 60
    while not (workdir / "corrupted").exists() and time.monotonic() < deadline:
        time.sleep(0.01)
    start = time.monotonic()
    result = "ok"
    try:
        for i in range(ROUNDS):
            exchange(i)
    except Exception as exc:  # what the test looks at
        result = f"{type(exc).__name__}: {exc}"
    (workdir / f"result{rank}").write_text(f"{time.monotonic() - start:.3f} {result}")
    start = time.monotonic()
    closed = "ok"
    try:
        session.finalize()
    except Exception as exc:  # reported, not judged
        closed = f"{type(exc).__name__}: {exc}"
    (workdir / f"finalized{rank}").write_text(f"{time.monotonic() - start:.3f} {closed}")


if __name__ == "__main__":
    main()
