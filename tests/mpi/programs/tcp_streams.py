"""Large eager messages over tcp: placed in posted receives or, unexpected, in their own buffer.

``--case streams`` checks contents, matching order, truncation and the eager
limit's edges, and which way each message took (the tcp module's counters).
``--case torn``: rank 0 writes half of a large message and exits; rank 1,
whose receive was placed, gets an error naming rank 0, not a hang.
"""

import os
import socket
import sys
import time

from _common import arguments, digest, payload, report, session
from mpi4py import MPI

import pmca
from pmca.btl.tcp import _wire as wire
from pmca.p2p import TruncationError
from pmca.p2p import _protocol as proto

args = arguments([("--chunk", {"default": None}), ("--case", {"default": "streams"})])
comm = MPI.COMM_WORLD
me = comm.Get_rank()
mca = {} if args.chunk is None else {"btl_tcp_bulk_chunk": args.chunk}
BIG = (1 << 20) + 3


def same(data, *key):
    return digest(data) == digest(payload(*key, size=len(data)))


if args.case == "keepalive":
    # What btl_tcp_keepalive_* asked for is what the kernel holds, at both ends.
    settings = {"btl_tcp_keepalive_time": 7, "btl_tcp_keepalive_interval": 1}
    with session(args.btl, **settings, btl_tcp_keepalive_probes=4) as s:
        s.p2p.send(1 - me, 1, b"x")
        s.p2p.recv(1 - me, 1, bytearray(1))
        tcp = next(m for m in s.modules("btl") if m.name == "tcp")
        (connection,) = tcp.connections().values()
        sock = connection.sock
        held = (
            sock.getsockopt(socket.SOL_SOCKET, socket.SO_KEEPALIVE),
            sock.getsockopt(socket.IPPROTO_TCP, socket.TCP_KEEPIDLE),
            sock.getsockopt(socket.IPPROTO_TCP, socket.TCP_KEEPINTVL),
            sock.getsockopt(socket.IPPROTO_TCP, socket.TCP_KEEPCNT),
        )
        assert held[0] != 0 and held[1:] == (7, 1, 4), held
    with session(args.btl, btl_tcp_keepalive_time=0) as s:
        s.p2p.send(1 - me, 1, b"x")
        s.p2p.recv(1 - me, 1, bytearray(1))
        tcp = next(m for m in s.modules("btl") if m.name == "tcp")
        (connection,) = tcp.connections().values()
        off = connection.sock.getsockopt(socket.SOL_SOCKET, socket.SO_KEEPALIVE)
        assert off == 0, off
    report(True, f"keepalive {held}")
    sys.exit(0)

if args.case == "torn":
    with session(args.btl, **mca) as s:
        p = s.p2p
        tcp = next(m for m in s.modules("btl") if m.name == "tcp")
        size = 2 << 20
        if me == 0:
            comm.Barrier()  # rank 1's receive is posted
            connection = tcp.connections()[1]
            head = proto.MATCH.pack(proto.EAGER, 0, p._seq_out[1], 7, size)
            frame = wire.FRAME.pack(wire.AM, p._tag, len(head) + size, 0)
            connection.sock.setblocking(True)
            connection.sock.sendall(frame + head + bytes(size // 2))
            time.sleep(0.2)
            os._exit(0)  # mid-message, no goodbye
        request = p.irecv(0, 7, bytearray(size))
        comm.Barrier()
        start = time.monotonic()
        try:
            request.wait(timeout=30)
        except pmca.btl.PeerFailed as exc:
            elapsed = time.monotonic() - start
            assert exc.rank == 0 and "rank 0" in str(exc), exc
            placed = tcp.streams_placed
            report(placed == 1, f"torn message: {placed} placed, error after {elapsed:.2f}s: {exc}")
        except TimeoutError as exc:
            report(False, f"torn message: {exc}")
        else:
            report(False, "torn message: no error although rank 0 left mid-message")
    os._exit(0)  # MPI_Finalize would wait for the departed rank

with session(args.btl, **mca) as s:
    p = s.p2p
    tcp = next(m for m in s.modules("btl") if m.name == "tcp")
    largest = tcp.limits.eager_limit - proto.MATCH.size
    if me == 0:
        # 1. The receive is posted first: the message lands in place.
        comm.Barrier()
        p.send(1, 1, payload("placed", size=BIG))
        comm.Barrier()  # rank 1 has counted it
        # 2. Nobody waits for it yet: placed in a buffer of its own, matched later.
        early = p.isend(1, 2, payload("staged", size=BIG))
        comm.Barrier()
        early.wait(timeout=60)
        # 3. Order: large, small, large with tags 3, 4, 3 (rank 1 posts 4 first).
        comm.Barrier()
        for n, (tag, key) in enumerate([(3, "first"), (4, "small"), (3, "second")]):
            p.send(1, tag, payload(key, size=100 if tag == 4 else BIG + n))
        # 4. Too large for the posted buffer; the stream goes on after it.
        comm.Barrier()
        p.send(1, 5, payload("truncated", size=BIG))
        p.send(1, 6, payload("after", size=BIG))
        # 5. The eager limit's edges: the largest eager message and the first rendezvous.
        comm.Barrier()
        p.send(1, 8, payload("largest", size=largest))
        p.send(1, 9, payload("rendezvous", size=largest + 1))
        comm.Barrier()
        report(True, "sent")
    else:
        out = bytearray(BIG)
        request = p.irecv(0, 1, out)
        comm.Barrier()
        assert request.wait(timeout=60) == BIG and same(out, "placed")
        assert (tcp.streams_placed, tcp.streams_staged) == (1, 0)
        comm.Barrier()

        comm.Barrier()
        deadline = time.monotonic() + 60
        while not p._unexpected and time.monotonic() < deadline:
            p.progress()  # the whole message arrives before its receive is posted
        assert (tcp.streams_placed, tcp.streams_staged) == (2, 0)
        (waiting,) = p._unexpected.streams[(0, 2)]
        assert type(waiting.payload) is bytearray, "kept as it landed, not copied"
        out = bytearray(BIG)
        assert p.recv(0, 2, out, timeout=60) == BIG and same(out, "staged")

        small = bytearray(100)
        first, second = bytearray(BIG), bytearray(BIG + 2)
        requests = [p.irecv(0, 4, small), p.irecv(0, 3, first), p.irecv(0, 3, second)]
        comm.Barrier()
        assert [r.wait(timeout=60) for r in requests] == [100, BIG, BIG + 2]
        assert same(small, "small") and same(first, "first") and same(second, "second")

        short, after = bytearray(100_000), bytearray(BIG)
        truncated, following = p.irecv(0, 5, short), p.irecv(0, 6, after)
        comm.Barrier()
        try:
            truncated.wait(timeout=60)
        except TruncationError as exc:
            assert f"message of {BIG} bytes from rank 0 tag 5" in str(exc), exc
        else:
            raise AssertionError("a message larger than the posted buffer was not refused")
        assert following.wait(timeout=60) == BIG and same(after, "after")
        assert tcp.streams_staged == 1, "the btl holds only the message no receive could take"

        edge, rendezvous = bytearray(largest), bytearray(largest + 1)
        requests = [p.irecv(0, 8, edge), p.irecv(0, 9, rendezvous)]
        placed = tcp.streams_placed
        comm.Barrier()
        assert [r.wait(timeout=60) for r in requests] == [largest, largest + 1]
        assert same(edge, "largest") and same(rendezvous, "rendezvous")
        assert tcp.streams_placed == placed + 1, "only the eager one streams"
        comm.Barrier()
        report(True, f"streams placed {tcp.streams_placed}, staged {tcp.streams_staged}")
