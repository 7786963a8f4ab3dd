"""A receiver that stops reading: the sender is held back, then everything arrives.

Rank 1 reads nothing until an MPI broadcast (which moves no pmca traffic)
while rank 0 floods it with isends of 16 KiB: most stay pending, rank 0's
memory grows by far less than it sent, and its btl/tcp copies stay within
``btl_tcp_send_queue_limit``; a blocking send with a timeout raises
naming rank 1. Once told how many to expect (an MPI broadcast) rank 1 reads
every message, intact and in order, and rank 0's isends all complete.
"""

import os
import sys

from _common import arguments, digest, payload, report, session
from mpi4py import MPI

from pmca.btl.tcp._connection import QUEUED_COST

args = arguments([("--count", {"type": int, "default": 8192})])
comm = MPI.COMM_WORLD
me = comm.Get_rank()
SIZE, LIMIT, COUNT = 16 * 1024, 256 * 1024, args.count
PAYLOADS = [payload("flood", i, size=SIZE) for i in range(4)]


def barrier(p2p):
    """An MPI barrier that keeps pmca progressing: sends a timed-out send left
    queued still have to reach the other rank, which waits for them."""
    request = comm.Ibarrier()
    while not request.Test():
        p2p.progress()


def rss():
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


with session(args.btl, btl_tcp_send_queue_limit=LIMIT) as s:
    p2p = s.p2p
    if me == 0:
        before = rss()
        requests = [p2p.isend(1, 5, PAYLOADS[i % 4]) for i in range(COUNT)]
        for _ in range(200):
            p2p.progress()
        grown = rss() - before
        pending = sum(not r.done for r in requests)
        held = [q for q in s._data_path().bml.queued_sends(1) if q.completed]
        owned = sum(q.nbytes + QUEUED_COST for q in held)
        # Blocking sends complete while the btl has room for them, then one waits.
        sent, timed_out = COUNT, ""
        while not timed_out and sent < COUNT + LIMIT // SIZE + 2:
            try:
                p2p.send(1, 5, PAYLOADS[sent % 4], timeout=1.0)
            except TimeoutError as exc:
                timed_out = str(exc)
            sent += 1  # sent anyway, once the receiver reads
        comm.bcast(sent, root=0)
        sizes = {r.wait(timeout=120) for r in requests}
        checks = {
            "most isends pending": pending > COUNT // 2,
            "memory bounded": grown < COUNT * SIZE // 3,
            "timeout names rank 1": "to rank 1" in timed_out,
            "isends completed whole": sizes == {SIZE},
        }
        if "tcp" in args.btl:
            checks["tcp copies within the limit"] = owned <= LIMIT
        failed = [name for name, ok in checks.items() if not ok]
        what = f"pending {pending}/{COUNT}, grown {grown}, owned {owned}, timeout {timed_out!r}"
        barrier(p2p)
        report(not failed, f"{what}; failed: {failed}" if failed else what)
    else:
        total = comm.bcast(None, root=0)  # reads nothing until here
        into = bytearray(SIZE)
        wrong = []
        for i in range(total):
            size = p2p.recv(0, 5, into, timeout=120)
            if size != SIZE or digest(into) != digest(PAYLOADS[i % 4]):
                wrong.append(i)
        barrier(p2p)
        report(not wrong, f"received {total}, wrong {wrong[:5]}")
sys.exit(0)
