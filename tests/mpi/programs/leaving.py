"""Finalize cases under a launcher, one per --case (see tests/mpi/test_leaving.py)."""

import signal
import time

from _common import arguments, report, session
from mpi4py import MPI

import pmca

args = arguments([("--case", {"required": True}), ("--count", {"type": int, "default": 100_000})])
comm = MPI.COMM_WORLD
me = comm.Get_rank()

if args.case == "late-receiver":
    # Rank 0 sends COUNT completed 1 KiB messages; rank 1 starts receiving 1 s late.
    with session(args.btl) as s:
        if me == 0:
            for i in range(args.count):
                s.p2p.send(1, 5, i.to_bytes(4, "little") + bytes(1020))
            left = time.monotonic()
        elif me == 1:
            time.sleep(1.0)
            buffer = bytearray(1024)
            received = 0
            try:
                for i in range(args.count):
                    s.p2p.recv(0, 5, buffer, timeout=120)
                    if int.from_bytes(buffer[:4], "little") != i:
                        break
                    received += 1
            except pmca.btl.BtlError as exc:
                report(False, f"received {received} of {args.count}, then {exc!r}")
            report(received == args.count, f"received {received} of {args.count}")
    if me == 0:
        report(True, f"finalize took {time.monotonic() - left:.2f}s")

if args.case == "raise":
    # The last rank raises inside its session while every other rank waits on it.
    last = comm.Get_size() - 1
    try:
        with session(args.btl) as s:
            comm.Barrier()  # every rank is inside its session
            if me == last:
                time.sleep(0.5)  # the others are waiting in their receive
                raised = time.monotonic()
                raise RuntimeError("the program failed")
            try:
                s.p2p.recv(last, 1, bytearray(8), timeout=30)
                report(False, "received a message the last rank never sent")
            except pmca.btl.PeerFinalized as exc:
                learned = time.monotonic()
                ok = exc.rank == last and exc.after_error and f"rank {last} finalized" in str(exc)
                report(ok, f"learned at {learned:.3f}: {exc}")
            except Exception as exc:
                report(False, f"{type(exc).__name__}: {exc}")
    except RuntimeError:
        report(True, f"raised at {raised:.3f}, finalize took {time.monotonic() - raised:.2f}s")

if args.case == "interrupt":
    # Every rank waits on a message nobody sends until the launcher is interrupted.
    interrupted = None

    def on_interrupt(signum, frame):
        global interrupted
        interrupted = time.monotonic()
        raise KeyboardInterrupt

    # Installed whatever the launcher left: a rank started with SIGINT ignored
    # would never see the interrupt.
    signal.signal(signal.SIGINT, on_interrupt)
    try:
        with session(args.btl) as s:
            comm.Barrier()  # every rank is inside its session
            report(True, "waiting")
            s.p2p.recv((me + 1) % comm.Get_size(), 1, bytearray(8), timeout=120)
            report(False, "received a message nobody sent")
    except KeyboardInterrupt:
        report(True, f"interrupted, finalize took {time.monotonic() - interrupted:.2f}s")
