"""Failure cases, one per --case; rank 0 reports, the others play the faulty peer."""

import os
import signal
import sys
import time

from _common import arguments, report, session
from mpi4py import MPI

import pmca

args = arguments(
    [
        ("--case", {"required": True}),
        ("--timeout", {"type": float, "default": 10.0}),
        ("--death", {"choices": ("kill", "exit"), "default": "kill"}),
    ]
)
comm = MPI.COMM_WORLD
me = comm.Get_rank()

if args.case == "killed-peer":
    # Rank 1 dies (SIGKILL) in the middle of a 64 MiB transfer to rank 0.
    with session(args.btl) as s:
        p = s.p2p
        if me == 1:
            entered = time.monotonic()
            request = p.isend(0, 1, bytes(64 << 20))
            p.progress()
            if args.result:
                # For a failure report: was the peer late to die, or rank 0 late to notice?
                with open(args.result, "a") as f:
                    f.write(
                        f"rank 1 dies {time.monotonic() - entered:.2f}s into its session "
                        f"(monotonic {time.monotonic():.3f})\n"
                    )
            if args.death == "kill":
                os.kill(os.getpid(), signal.SIGKILL)
            os._exit(137)  # no finalizer, no goodbye: the kernel closes everything
        start = time.monotonic()
        out = bytearray(64 << 20)
        try:
            p.recv(1, 1, out, timeout=args.timeout)
            p.recv(1, 2, out, timeout=args.timeout)
        except pmca.btl.PeerFailed as exc:
            elapsed = time.monotonic() - start
            assert exc.rank == 1 and "rank 1" in str(exc), exc
            report(elapsed < args.timeout, f"peer error after {elapsed:.2f}s: {exc}")
        except TimeoutError as exc:
            report(False, f"{exc} (waiting since monotonic {start:.3f})")
        else:
            report(False, "no error although rank 1 was killed")
    # MPI_Finalize would wait for the dead rank: leave without it.
    os._exit(0)

if args.case == "silent-peer":
    # Rank 1 never joins the modex: rank 0's init fails naming it.
    if me == 1:
        pmca.world.from_mpi(comm)  # collective; then never init a session
        time.sleep(args.timeout + 3)
        sys.exit(0)
    start = time.monotonic()
    try:
        session(args.btl, pmca_base_modex_timeout=args.timeout).init()
    except pmca.btl.ModexError as exc:
        elapsed = time.monotonic() - start
        assert "rank(s) 1" in str(exc) or "ranks 1" in str(exc) or "rank 1" in str(exc), exc
        report(elapsed < args.timeout + 5, f"modex error after {elapsed:.2f}s: {exc}")
        sys.exit(0)
    report(False, "init succeeded without rank 1")

if args.case == "finalize-in-flight":
    # Rank 0 finalizes with a 16 MiB isend not waited for; rank 1 receives it
    # late. Then rank 1 leaves an unmatched irecv behind at finalize.
    s = session(args.btl).init()
    p = s.p2p
    if me == 0:
        data = bytes(range(256)) * (1 << 16)
        request = p.isend(1, 3, data)
        s.finalize()
        assert request.done and request.error is None, request
        report(True, "isend completed by finalize")
    else:
        time.sleep(0.5)
        out = bytearray(16 << 20)
        assert p.recv(0, 3, out) == 16 << 20
        assert out == bytes(range(256)) * (1 << 16)
        stray = p.irecv(0, 4, bytearray(10))
        s.finalize()
        assert stray.done and isinstance(stray.error, pmca.btl.BtlError), stray
        report(True, f"pending irecv failed cleanly: {stray.error}")

if args.case == "bystander-lost":
    # Rank 0 reads rank 1's 16 MiB message (a tcp get, answered only once
    # rank 1 wakes from a sleep without progress); meanwhile rank 2, which
    # has nothing to do with that transfer, dies.
    s = session(args.btl).init()
    p = s.p2p
    size = 16 << 20
    data = bytes(range(256)) * (size // 256)
    if me == 2:
        p.send(0, 1, b"hello")
        p.recv(0, 2, bytearray(2))
        if args.death == "kill":
            os.kill(os.getpid(), signal.SIGKILL)
        os._exit(137)  # no finalizer, no goodbye: the kernel closes everything
    if me == 1:
        request = p.isend(0, 3, data)
        p.progress()
        time.sleep(3.0)  # rank 0 asked for the data and waits; rank 2 dies meanwhile
        request.wait(timeout=args.timeout)
        report(True, "the 16 MiB send completed although rank 2 died")
        os._exit(0)
    assert p.recv(2, 1, bytearray(5)) == 5
    out = bytearray(size)
    start = time.monotonic()
    request = p.irecv(1, 3, out)
    while time.monotonic() < start + 0.5:  # the header arrives; the get goes out
        assert not request.test()
    p.send(2, 2, b"go")
    try:
        request.wait(timeout=args.timeout)
    except pmca.btl.BtlError as exc:
        report(False, f"the receive from rank 1 failed: {exc!r}")
    assert out == data
    report(True, f"rank 1's 16 MiB arrived intact after {time.monotonic() - start:.2f}s")
    # MPI_Finalize would wait for the dead rank: leave without it.
    os._exit(0)
