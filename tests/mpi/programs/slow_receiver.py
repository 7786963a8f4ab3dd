"""A receiver slower than its sender: what it holds stays within btl_tcp_recv_queue_limit.

Rank 0 isends COUNT messages of 1 MiB with tag 5, then one with tag 6, and
waits for them all. Rank 1 first only progresses (a compute phase that
polls, as an MPI_Test loop does) for a while and receives nothing: every
message arriving then is unexpected. What it holds of rank 0's messages
(the unexpected queue's peak, in messages; the engine's held bytes) and its
memory must stay within the limit plus one message. Then it receives the
tag-6 message, which is behind every tag-5 one on the socket (the stopped
socket must be read again for it: ``--behind recv`` posts the receive,
``--behind iprobe`` polls ``iprobe(ANY_SOURCE, 6)`` until it is there), and
then every tag-5 message, each intact and in order. Without flow control
rank 1 takes in all COUNT MiB during its compute phase.
"""

import os
import sys
import time

from _common import arguments, digest, payload, report, session
from mpi4py import MPI

import pmca

args = arguments(
    [
        ("--count", {"type": int, "default": 64}),
        ("--limit", {"type": int}),
        ("--behind", {"choices": ["recv", "iprobe"], "default": "recv"}),
    ]
)
comm = MPI.COMM_WORLD
me = comm.Get_rank()
SIZE, COUNT, LIMIT = 1 << 20, args.count, args.limit
COMPUTE = 2.0  # seconds of progress without receiving


def rss():
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


def barrier(p2p):
    request = comm.Ibarrier()
    while not request.Test():
        p2p.progress()


with session(args.btl, btl_tcp_recv_queue_limit=LIMIT) as s:
    p2p = s.p2p
    if me == 0:
        comm.barrier()
        requests = [p2p.isend(1, 5, payload("slow", i, size=SIZE)) for i in range(COUNT)]
        requests.append(p2p.isend(1, 6, payload("last", size=SIZE)))
        sizes = {r.wait(timeout=240) for r in requests}
        barrier(p2p)
        report(sizes == {SIZE}, f"sent {len(requests)}, sizes {sorted(sizes)}")
    else:
        tcp = next(m for m in s._data_path().bml.modules if m.name == "tcp")
        before = rss()
        comm.barrier()
        grown = 0
        ends = time.monotonic() + COMPUTE
        while time.monotonic() < ends:  # computing, polling progress now and then
            p2p.progress()
            grown = max(grown, rss() - before)
            time.sleep(0.001)
        peak = p2p.unexpected_peak
        held_peak = getattr(p2p, "held_peak", -1)
        pauses = sum(getattr(c, "pauses", 0) for c in tcp.connections().values())
        into = bytearray(SIZE)
        found = True
        if args.behind == "iprobe":
            deadline = time.monotonic() + 60
            while p2p.iprobe(pmca.ANY_SOURCE, 6) is None:
                if time.monotonic() > deadline:
                    found = False  # the stopped socket was never read again
                    break
        last = p2p.recv(0, 6, into, timeout=120)  # behind every tag-5 message
        wrong = [] if last == SIZE and digest(into) == digest(payload("last", size=SIZE)) else [-1]
        for i in range(COUNT):
            size = p2p.recv(0, 5, into, timeout=120)
            if size != SIZE or digest(into) != digest(payload("slow", i, size=SIZE)):
                wrong.append(i)
        barrier(p2p)
        bound = LIMIT + SIZE  # one message completes after the limit is passed
        checks = {
            "unexpected within the limit": 0 < peak * SIZE <= bound,
            "held bytes within the limit": 0 < held_peak <= bound + SIZE,
            "memory within the limit": grown <= bound + 16 * SIZE,
            "reading stopped": pauses > 0,
            "all intact and in order": not wrong,
            "the message behind found": found,
        }
        failed = [name for name, ok in checks.items() if not ok]
        what = (
            f"peak {peak} messages, held {held_peak} bytes, grown {grown >> 20} MiB "
            f"(limit {LIMIT >> 20} MiB), stopped {pauses} times, wrong {wrong[:5]}"
        )
        report(not failed, f"{what}; failed: {failed}" if failed else what)
sys.exit(0)
