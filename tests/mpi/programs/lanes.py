"""Blocking send/recv through btl/sm's lanes, and every hand-over to the general path.

Two ranks; rank 1 sends, rank 0 receives (and the reverse in the ping-pong).
The transport's lane counters show which messages went through a lane:
each case checks both the bytes and the path they took.
"""

import array
import sys
import threading
import time
import traceback

import numpy as np
from _common import arguments, payload, report, session
from mpi4py import MPI

from pmca.p2p import TruncationError

args = arguments()
comm = MPI.COMM_WORLD
MATCH_HEADER = 24
#: Any single receive: a lost or misrouted message fails the job instead of hanging it.
T = 30


def lane_counts(sm):
    stats = sm.transport.stats()
    return stats["lane_sent"], stats["lane_received"]


def diagnosis(s, sm):
    p = s.p2p
    return {
        "stash": [sorted(d) for d in p._stash],
        "seq_in": p._seq_in,
        "posted": [*p._posted.streams, *((r.peer, r.tag) for r in p._posted.wild)],
        "unexpected": list(p._unexpected.streams),
        "yield": p.yield_when_idle,
        "queued": sm._queued,
        "blocked": sm._lanes_blocked,
        "lanes": p._lanes,
        "stats": sm.transport.stats(),
    }


def cases(s):
    p = s.p2p
    me = p.rank
    assert p.size == 2, "run with 2 ranks"
    peer = 1 - me
    sm = next(module for module in s.modules("btl") if module.name == "sm")
    assert s.reach(peer)[0] == "sm", s.reach(peer)
    limit = sm.limits.eager_limit - MATCH_HEADER  # the largest payload a lane carries

    # 1. ping-pong: every send through a lane; bytes, bytearray and memoryview
    sent0, _ = lane_counts(sm)
    rounds = 200
    into = bytearray(8)
    for i in range(rounds):
        message = i.to_bytes(8, "little")
        if me == 0:
            p.send(peer, 1, message if i % 3 else bytearray(message))
            assert p.recv(peer, 1, into if i % 2 else memoryview(into), timeout=T) == 8
        else:
            assert p.recv(peer, 1, into, timeout=T) == 8
            p.send(peer, 1, into if i % 2 else bytes(into))
        assert into == message, (i, bytes(into))
    sent1, received1 = lane_counts(sm)
    assert sent1 - sent0 == rounds, (sent0, sent1)
    # a receive that went the general way polls everything: none of case 2 may be there yet
    comm.Barrier()

    # 2. messages already waiting: each blocking recv takes one through the lane
    waiting = 30
    if me == 1:
        for i in range(waiting):
            p.send(peer, 2, payload("waiting", i, size=i * 100))
    comm.Barrier()
    if me == 0:
        for i in range(waiting):
            out = bytearray(i * 100 + 7)
            assert p.recv(peer, 2, out, timeout=T) == i * 100
            assert out[: i * 100] == payload("waiting", i, size=i * 100), i
        _, received2 = lane_counts(sm)
        assert received2 - received1 == waiting, (received1, received2, diagnosis(s, sm))
    comm.Barrier()

    # 3. unexpected messages, mixed tags and sizes across the eager limit
    plan = [
        (10, 5),
        (11, limit),
        (10, limit - 1),
        (11, limit + 1),  # a rendezvous behind unexpected messages: the general path
        (11, 0),
        (10, 200_000),
        (11, 3),
        (12, 1 << 20),
        (10, 1),
    ]
    large = []
    if me == 1:
        for index, (tag, size) in enumerate(plan):
            data = payload("plan", index, size=size)
            if size <= limit:
                p.send(peer, tag, data)
            else:  # a blocking send would wait for the receiver, behind the barrier
                large.append(p.isend(peer, tag, data))
    comm.Barrier()
    for request in large:
        request.wait(timeout=T)
    if me == 0:
        # tag 11 first: the lane hands the tag-10 messages in front on as unexpected
        for tag in (11, 12, 10):
            for index, (want, size) in enumerate(plan):
                if want != tag:
                    continue
                out = bytearray(size)
                assert p.recv(peer, tag, out, timeout=T) == size, (tag, size)
                assert out == payload("plan", index, size=size), (tag, size)
    comm.Barrier()

    # 4. a receive posted first gets the first message of its stream
    if me == 0:
        first, second = bytearray(5), bytearray(6)
        request = p.irecv(peer, 20, first)
        comm.Barrier()
        assert p.recv(peer, 20, second, timeout=T) == 6
        assert request.wait(timeout=T) == 5
        assert (first, second) == (b"first", b"second")
    else:
        comm.Barrier()
        p.send(peer, 20, b"first")
        p.send(peer, 20, b"second")
    comm.Barrier()

    # 5. truncation at a lane: the message is consumed, the stream goes on; the lane
    #    hands the message that does not fit on (the general path reports it) and
    #    lands the next one
    if me == 1:
        p.send(peer, 30, bytes(range(16)))
        p.send(peer, 30, b"12345678")
    comm.Barrier()
    if me == 0:
        _, before = lane_counts(sm)
        try:
            p.recv(peer, 30, bytearray(8), timeout=T)
        except TruncationError as exc:
            assert "16 bytes" in str(exc) and "8-byte" in str(exc), exc
        else:
            raise AssertionError("a 16-byte message fit an 8-byte buffer")
        out = bytearray(8)
        assert p.recv(peer, 30, out, timeout=T) == 8 and out == b"12345678"
        assert lane_counts(sm)[1] - before == 1
    comm.Barrier()

    # 6. tags up to 2**62 - 1 travel as two halves: both must match
    top = (1 << 62) - 1
    tags = [5, (1 << 32) + 5, top, top - 0xFFFFFFFF, 0xFFFFFFFF, 1 << 32, (1 << 61) + 5]
    if me == 1:
        for tag in tags:
            p.send(peer, tag, tag.to_bytes(8, "little", signed=True))
    comm.Barrier()
    if me == 0:
        for tag in reversed(tags):
            out = bytearray(8)
            assert p.recv(peer, tag, out, timeout=T) == 8
            assert int.from_bytes(out, "little", signed=True) == tag, tag
    comm.Barrier()

    # 7. numpy arrays and array.array, both ways
    values = np.arange(100, dtype="float64") * (me + 1)
    got = np.zeros(100, dtype="float64")
    doubles = array.array("d", [0.0] * 100)
    if me == 0:
        p.send(peer, 40, values)
        p.recv(peer, 40, got, timeout=T)
        p.recv(peer, 41, doubles, timeout=T)
    else:
        p.recv(peer, 40, got, timeout=T)
        p.send(peer, 40, values)
        p.send(peer, 41, array.array("d", values))
    assert np.array_equal(got, np.arange(100, dtype="float64") * (peer + 1))
    if me == 0:
        assert list(doubles) == list(np.arange(100, dtype="float64") * 2)
    comm.Barrier()

    # 8. two receiving threads, interleaved streams: each stays in order
    per_thread = 150
    if me == 0:
        failures = []

        def receive(tag):
            out = bytearray(16)
            for i in range(per_thread):
                p.recv(peer, tag, out, timeout=60)
                if out != payload("thread", tag, i, size=16):
                    failures.append((tag, i))

        threads = [threading.Thread(target=receive, args=(tag,)) for tag in (50, 51)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(timeout=120)
        assert not any(thread.is_alive() for thread in threads), "a receiving thread hangs"
        assert failures == [], failures[:5]
    else:
        for i in range(per_thread):
            for tag in (50, 51):
                p.send(peer, tag, payload("thread", tag, i, size=16))
    comm.Barrier()

    # 9. nothing comes: the lane gives up and the timeout is the request's
    if me == 0:
        try:
            p.recv(peer, 60, bytearray(1), timeout=0.3)
        except TimeoutError as exc:
            assert "rank 1 tag 60" in str(exc), exc
        else:
            raise AssertionError("a receive of a message never sent returned")
    comm.Barrier()


def rendezvous_cases(s):
    """Receives into buffers larger than the eager limit land in place; a rendezvous
    waiting at the head of the FIFO is read by the lane itself (CMA and FIN)."""
    p = s.p2p
    me, peer = p.rank, 1 - p.rank
    sm = next(module for module in s.modules("btl") if module.name == "sm")
    limit = sm.limits.eager_limit - MATCH_HEADER

    # 10. rendezvous and eager messages already waiting, each received into a larger buffer
    sizes = [limit + 1, 4096, 10, 100_000, 0, 1 << 20]
    requests = []
    if me == 1:
        for index, size in enumerate(sizes):
            requests.append(p.isend(peer, 70, payload("in place", index, size=size)))
    comm.Barrier()
    if me == 0:
        _, before = lane_counts(sm)
        for index, size in enumerate(sizes):
            out = bytearray(size + 4096 + 13)
            assert p.recv(peer, 70, out, timeout=T) == size, (index, size)
            assert out[:size] == payload("in place", index, size=size), (index, size)
            assert not any(out[size:]), (index, size)
        _, after = lane_counts(sm)
        if sm.mechanism == "cma":  # emulated put/get is the general path's
            assert after - before == len(sizes), (before, after, diagnosis(s, sm))
    for request in requests:
        request.wait(timeout=T)
    comm.Barrier()

    # 11. a rendezvous too large for the buffer: both sides see the truncation, the
    # stream goes on
    if me == 1:
        large = p.isend(peer, 71, payload("too large", size=1 << 20))
        p.send(peer, 71, b"after")
    comm.Barrier()
    if me == 0:
        try:
            p.recv(peer, 71, bytearray(limit + 100), timeout=T)
        except TruncationError as exc:
            assert f"{1 << 20} bytes" in str(exc), exc
        else:
            raise AssertionError("a 1 MiB rendezvous fit a smaller buffer")
        out = bytearray(limit + 100)
        assert p.recv(peer, 71, out, timeout=T) == 5 and out[:5] == b"after"
    else:
        try:
            large.wait(timeout=T)
        except TruncationError:
            pass
        else:
            raise AssertionError("the sender of a truncated rendezvous was not told")
    comm.Barrier()

    # 12. a blocking ping-pong of rendezvous messages, both ways through the lanes
    into = bytearray(1 << 18)
    sent_before, _ = lane_counts(sm)
    for i in range(20):
        data = payload("pingpong", i, size=(1 << 18) - i)
        if me == 0:
            p.send(peer, 72, data, timeout=T)
            assert p.recv(peer, 72, into, timeout=T) == len(data)
        else:
            assert p.recv(peer, 72, into, timeout=T) == len(data)
            p.send(peer, 72, into[: len(data)], timeout=T)
        assert into[: len(data)] == data, i
    # nothing queued in a ping-pong: every rendezvous header went through the lane
    assert lane_counts(sm)[0] - sent_before == 20, (sent_before, diagnosis(s, sm))
    # and every blocking send's registration and record ended with its FIN
    assert not p._sends and not sm._registrations._live, diagnosis(s, sm)
    comm.Barrier()

    # 13. a blocking rendezvous send whose receiver comes late: it stops polling its
    # lane for the FIN and waits as a request, which that FIN completes
    size = 1 << 17
    if me == 1:
        p.send(peer, 73, payload("late", size=size), timeout=T)
        p.send(peer, 73, b"next")
    else:
        time.sleep(0.3)  # longer than any lane spin
        out = bytearray(size)
        assert p.recv(peer, 73, out, timeout=T) == size and out == payload("late", size=size)
        assert p.recv(peer, 73, out, timeout=T) == 4 and out[:4] == b"next"
    comm.Barrier()
    assert not p._sends and not sm._registrations._live, diagnosis(s, sm)

    # 14. a blocking rendezvous send the receiver truncates: both sides are told, the
    # stream goes on
    if me == 1:
        try:
            p.send(peer, 74, payload("too large", size=size), timeout=T)
        except TruncationError as exc:
            assert f"the {size}-byte message" in str(exc), exc
        else:
            raise AssertionError("the blocking sender of a truncated rendezvous was not told")
        p.send(peer, 74, b"after")
    else:
        try:
            p.recv(peer, 74, bytearray(size - 1), timeout=T)
        except TruncationError as exc:
            assert f"{size} bytes" in str(exc), exc
        else:
            raise AssertionError(f"a {size}-byte rendezvous fit a smaller buffer")
        out = bytearray(8)
        assert p.recv(peer, 74, out, timeout=T) == 5 and out[:5] == b"after"
    comm.Barrier()
    assert not p._sends and not sm._registrations._live, diagnosis(s, sm)


with session(args.btl) as s:
    try:
        cases(s)
        rendezvous_cases(s)
    except BaseException:
        # the peer may be blocked in an MPI barrier: fail the job now, not at its time-out
        traceback.print_exc()
        sys.stderr.flush()
        comm.Abort(1)
report(True, f"{args.btl} lanes")
