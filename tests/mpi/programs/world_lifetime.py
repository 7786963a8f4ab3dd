"""A launcher's world (PMIx under mpirun, PMI under mpiexec) from birth to exit, one --case each.

Every rank prints ``LAST rank N`` as its very last output: the test checks
the launcher forwarded it and exited 0.
"""

import argparse
import os
import sys
import time

import pmca

parser = argparse.ArgumentParser()
parser.add_argument("--case", required=True)
parser.add_argument("--result", required=True)
args = parser.parse_args()

#: The bound the silent-peer case builds its world with, in seconds.
BOUND = 2.0


def report(rank, message):
    with open(args.result, "a") as f:  # launchers may stop forwarding output
        f.write(f"rank {rank} {message}\n")


def last(rank):
    print(f"LAST rank {rank}", flush=True)


if args.case == "unclosed":
    # Built, used, never closed: closed at exit.
    world = pmca.world.from_launcher()
    world.barrier(timeout=30)
    last(world.rank)

elif args.case == "unclosed-beside-mpi":
    # MPI initialized first (sharing the launcher's client), the world never
    # closed: closed at exit, before mpi4py finalizes MPI.
    from mpi4py import MPI

    MPI.COMM_WORLD.Barrier()
    world = pmca.world.from_launcher()
    assert world.allgather(b"%d" % world.rank, timeout=30) == [b"%d" % r for r in range(world.size)]
    last(world.rank)

elif args.case == "with":
    with pmca.world.from_launcher() as world:
        world.barrier(timeout=30)
    try:
        world.barrier(timeout=30)
    except pmca.world.LauncherError as exc:
        report(world.rank, f"closed: {exc}")
    last(world.rank)

elif args.case == "silent-peer":
    # Rank 1 never enters a collective: each of rank 0's ends, within its
    # bound, in WorldTimeout. Without a timeout of its own a collective
    # waits the world's (BOUND here).
    world = pmca.world.from_launcher(timeout=BOUND)
    done = args.result + ".done"
    if world.rank == 0:
        steps = (
            ("barrier", lambda: world.barrier(), BOUND),
            ("allgather", lambda: world.allgather(b"entry"), BOUND),
            ("barrier(timeout=1)", lambda: world.barrier(timeout=1), 1.0),
        )
        for what, call, bound in steps:
            start = time.monotonic()
            try:
                call()
            except pmca.world.WorldTimeout as exc:
                report(
                    0,
                    f"{what} WorldTimeout after {time.monotonic() - start:.2f}s "
                    f"bound {bound:g}: {exc}",
                )
            except pmca.world.LauncherError as exc:  # after a timeout PMI refuses more
                report(0, f"{what} LauncherError after {time.monotonic() - start:.2f}s: {exc}")
            else:
                report(0, f"{what} returned without rank 1")
        open(done, "w").close()
    else:
        deadline = time.monotonic() + 60
        while not os.path.exists(done) and time.monotonic() < deadline:
            time.sleep(0.05)
    world.close()
    last(world.rank)

else:
    sys.exit(f"unknown case {args.case}")
