"""Ranks spread over simulated hosts: placement, reach, every size between every pair.

``--case exchange``: each rank checks where it runs (hostname and network
namespace, from the rank itself), that ``sm`` reaches exactly the ranks of its
own host, then exchanges every size with every other rank, checksummed.
``--case outage``: every rank exchanges large messages with the last rank (on
another host); the test cuts or freezes the last rank's host once the
``transfer`` line is in the result file; every rank reports what it saw.
"""

import os
import socket
import time

from _common import arguments, digest, payload, report, session
from mpi4py import MPI

import pmca

SIZES = [0, 1, 8, 4095, 65_537, 1 << 20, (4 << 20) + 3, 16 << 20, 64 << 20]

args = arguments(
    [
        ("--case", {"default": "exchange"}),
        ("--hosts", {"type": int, "required": True}),
        ("--max-size", {"type": int, "default": 64 << 20}),
        ("--zerocopy", {"default": "auto"}),
        ("--keepalive", {"type": int, "default": 10}),
        ("--rounds", {"type": int, "default": 6}),
    ]
)
comm = MPI.COMM_WORLD
here = (socket.gethostname(), os.stat("/proc/self/ns/net").st_ino)
everyone = comm.allgather(here)
me, size = comm.Get_rank(), comm.Get_size()


def note(line):
    if args.result:
        with open(args.result, "a") as f:
            f.write(line + "\n")


mca = {
    "btl_tcp_zerocopy": args.zerocopy,
    "btl_tcp_keepalive_time": args.keepalive,
    "btl_tcp_keepalive_interval": 1,
    "btl_tcp_keepalive_probes": 2,
}
bound = args.keepalive + 2

if args.case == "exchange":
    with session(args.btl, **mca) as s:
        p = s.p2p
        hosts = sorted(set(everyone))
        assert len(hosts) == args.hosts, f"ranks landed on {len(hosts)} hosts: {everyone}"
        for rank in range(size):
            reach = s.reach(rank)
            if rank == me:
                continue
            same = everyone[rank] == here
            assert ("sm" in reach) == (same and "sm" in args.btl), (rank, reach, everyone)
            assert same or reach == ["tcp"], (rank, reach)
        for step in range(1, size):
            right, left = (me + step) % size, (me - step) % size
            for index, n in enumerate(x for x in SIZES if x <= args.max_size):
                out = bytearray(n)
                request = p.irecv(left, index, out)
                p.send(right, index, payload(me, right, n, size=n))
                assert request.wait(timeout=300) == n
                assert digest(out) == digest(payload(left, me, n, size=n)), (
                    f"{n} bytes from rank {left} on {everyone[left][0]} corrupted"
                )
        tcp = [m for m in s.modules("btl") if m.name == "tcp"]
        zc = tcp[0].zerocopy_stats() if tcp else None
        host_count = len(hosts)
    report(True, f"on {here[0]} of {host_count} hosts, every pair checksummed; zerocopy {zc}")

elif args.case == "outage":
    # Every rank swaps 16 MiB messages with the last rank, round after round
    # (the last rank with all the others at once); the test acts on the last
    # rank's host after the first round.
    victim = size - 1
    s = session(args.btl, **mca).init()
    p = s.p2p
    n = 16 << 20
    others = [r for r in range(size) if r != me] if me == victim else [victim]
    try:
        for round_ in range(args.rounds):
            outs = {r: bytearray(n) for r in others}
            receives = {r: p.irecv(r, round_, outs[r]) for r in others}
            sends = [p.isend(r, round_, payload(me, r, round_, n, size=n)) for r in others]
            for request in [*sends, *receives.values()]:
                request.wait(timeout=300)
            for r in others:
                assert digest(outs[r]) == digest(payload(r, me, round_, n, size=n)), (r, round_)
            if round_ == 0 and me == 0:
                note(f"transfer monotonic {time.monotonic():.3f}")
        report(True, f"on {here[0]}: all {args.rounds} rounds arrived intact")
    except pmca.btl.PeerFailed as exc:
        note(f"failed monotonic {time.monotonic():.3f}")
        report(True, f"on {here[0]}: PeerFailed: {exc}")
    # Finalize of a survivor completes (and says so); MPI_Finalize would wait for
    # the lost host, so leave without it.
    s.finalize()
    report(True, f"on {here[0]}: finalized")
    os._exit(0)
