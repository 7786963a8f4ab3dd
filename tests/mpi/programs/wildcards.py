"""A server rank receives from every other rank with ANY_SOURCE/ANY_TAG (blocking, posted
in batches, matched probes): each message once, per-source order kept, the right Status;
a cancelled wildcard receive takes nothing."""

from __future__ import annotations

import struct

from _common import arguments, report, session
from mpi4py import MPI

import pmca
from pmca.p2p import ANY_SOURCE, ANY_TAG, wait_all

args = arguments([("--count", {"type": int, "default": 60})])
T = 120
HEAD = struct.Struct("<II")


def size_of(rank, i):
    return (100_000, 300_000)[i % 2] if i % 5 == 0 else 8 + (rank * 131 + i * 17) % 2000


def tag_of(rank, i):
    return (i * 7 + rank) % 5


def message(rank, i):
    size = size_of(rank, i)
    return (HEAD.pack(rank, i) + bytes([rank]) * size)[:size]


with session(args.btl) as s:
    p = s.p2p
    me, size = p.rank, p.size
    count = args.count
    if me != 0:
        for i in range(count):
            p.send(0, tag_of(me, i), message(me, i), timeout=T)
    else:
        cancelled = p.irecv(ANY_SOURCE, 999, bytearray(8))
        total = count * (size - 1)
        got = []  # (source, index) in matching order

        def check(out, status):
            source, index = HEAD.unpack_from(out)
            assert status.error is None and not status.cancelled, status
            assert (status.source, status.tag) == (source, tag_of(source, index)), status
            assert status.count == size_of(source, index), status
            assert bytes(out[: status.count]) == message(source, index), (source, index)
            got.append((source, index))

        while len(got) < total:
            phase = len(got) % 3
            if phase == 0:  # blocking, wildcard source and tag
                out = bytearray(300_000)
                check(out, p.recv(ANY_SOURCE, ANY_TAG, out, timeout=T, status=True))
            elif phase == 1:  # a batch of posted wildcard receives, matched in posting order
                batch = min(6, total - len(got))
                outs = [bytearray(300_000) for _ in range(batch)]
                requests = [p.irecv(ANY_SOURCE, ANY_TAG, out) for out in outs]
                wait_all(requests, timeout=T)
                for out, request in zip(outs, requests, strict=True):
                    check(out, request.status)
            else:  # a matched probe, then that message's own receive
                handle = p.mprobe(ANY_SOURCE, ANY_TAG, timeout=T)
                out = bytearray(handle.status.count)
                check(out, handle.recv(out, timeout=T, status=True))
        assert sorted(got) == sorted((r, i) for r in range(1, size) for i in range(count))
        for source in range(1, size):
            indices = [i for r, i in got if r == source]
            assert indices == list(range(count)), (source, indices[:10])
        assert p.iprobe(ANY_SOURCE, ANY_TAG) is None
        assert cancelled.cancel() and cancelled.wait(timeout=T) == 0
        assert cancelled.status.cancelled
        assert pmca.ANY_SOURCE == ANY_SOURCE
    MPI.COMM_WORLD.Barrier()
    report(True, f"wildcards {args.btl}")
