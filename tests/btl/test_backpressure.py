"""Back-pressure: a peer that stops reading holds its sender back, and loses nothing.

Rank 0 (this process) floods rank 1 (a child) with isends while rank 1 reads
nothing. A send completes once its btl owns the bytes, and what a btl owns
is bounded (btl/tcp by ``btl_tcp_send_queue_limit``, btl/sm by its FIFO), so
most of the isends stay pending, the sender's memory stays far below what
it sent, and a blocking send waits: with a timeout it raises naming the
peer, without one it returns only once the receiver reads again. Then every
message arrives intact and in order. Before btl/tcp bounded its queue,
every send completed at once and the sender grew by all it sent.
"""

from __future__ import annotations

import textwrap

import pytest

from pmca.btl import FRAMEWORK
from pmca.btl.tcp._connection import QUEUED_COST
from pmca.testing import run_pair

#: The flood: 8,192 messages of 16 KiB (copied by btl/tcp when queued), 128 MiB.
COUNT = 8192
SIZE = 16 * 1024
LIMIT = 256 * 1024

_SIDE = textwrap.dedent(
    """
    import hashlib, os, socket, sys, threading, time
    from pathlib import Path
    import pmca
    from pmca.world import PairWorld

    MCA = {mca!r}
    COUNT, SIZE, LIMIT = {count}, {size}, {limit}
    GO = Path({go!r})
    PAYLOADS = [hashlib.blake2b(bytes([i]), digest_size=64).digest() * (SIZE // 64)
                for i in range(4)]

    def rss():
        with open("/proc/self/statm") as f:
            return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")

    def receive(s):
        deadline = time.monotonic() + 300
        while not GO.exists():  # not reading: nothing progresses here
            assert time.monotonic() < deadline, "never told to read"
            time.sleep(0.05)
        total = int(GO.read_text())
        into = bytearray(SIZE)
        for i in range(total):
            size = s.p2p.recv(0, 5, into, timeout=120)
            assert size == SIZE and into == PAYLOADS[i % 4], f"message {{i}} corrupted"
        return total

    def flood(s):
        p2p = s.p2p
        btl = s._data_path().bml
        before = rss()
        requests = [p2p.isend(1, 5, PAYLOADS[i % 4]) for i in range(COUNT)]
        # What the btl copied once the socket was full (completed, still queued).
        copied = [q for q in btl.queued_sends(1) if q.completed]
        for _ in range(200):
            p2p.progress()
        grown = rss() - before
        # After progress: the copies the kernel's buffers did not take yet (how many
        # depends on the socket buffer sizes the host allows: none is fine).
        held = [q for q in btl.queued_sends(1) if q.completed]
        pending = sum(not r.done for r in requests)
        # Blocking sends complete while the btl has room for them, then one waits.
        sent, timed_out = COUNT, ""
        while not timed_out and sent < COUNT + LIMIT // SIZE + 2:
            try:
                p2p.send(1, 5, PAYLOADS[sent % 4], timeout=1.0)
            except TimeoutError as exc:
                timed_out = str(exc)
            sent += 1  # sent anyway, once the receiver reads
        told = []

        def tell():
            time.sleep(1.0)
            told.append(time.monotonic())
            ready = GO.with_suffix(".new")
            ready.write_text(str(sent + 1))
            ready.rename(GO)  # whole, at once

        teller = threading.Thread(target=tell)
        teller.start()
        p2p.send(1, 5, PAYLOADS[sent % 4])  # waits for the receiver
        returned = time.monotonic()
        teller.join()
        sizes = [r.wait(timeout=120) for r in requests]
        return {{
            "grown": grown,
            "copied": sum(q.nbytes for q in copied),
            "copied_count": len(copied),
            "held": sum(q.nbytes for q in held),
            "held_count": len(held),
            "pending": pending,
            "timed_out": timed_out,
            "total": sent + 1,
            "waited": bool(told) and returned >= told[0],
            "sizes": sorted(set(sizes)),
        }}

    def run(fd, rank):
        world = PairWorld(socket.socket(fileno=fd), rank)
        with pmca.Session(mca=MCA, world=world) as s:
            return flood(s) if rank == 0 else receive(s)

    if __name__ == "__main__":
        print(run(int(sys.argv[1]), 1))
    """
)

_HAS_SM = any(ref.name == "sm" for ref in FRAMEWORK.static_components)
BTLS = ["self,tcp"] + (["self,sm"] if _HAS_SM else [])


@pytest.mark.parametrize("btl", BTLS)
def test_a_receiver_that_stops_reading_holds_the_sender_back(pmca_env, tmp_path, btl) -> None:
    mca = {"btl": btl, "btl_tcp_send_queue_limit": LIMIT, "pmca_base_modex_timeout": 120}
    source = _SIDE.format(mca=mca, count=COUNT, size=SIZE, limit=LIMIT, go=str(tmp_path / "go"))
    result, out = run_pair(source, tmp_path, timeout=600)
    # every message arrived intact, in order
    assert out.strip() == str(result["total"]), (out, result)
    sent = COUNT * SIZE
    # Most isends wait for the receiver; the sender holds what its btl owns, not all it sent.
    assert result["pending"] > COUNT // 2, result
    assert result["grown"] < sent // 3, result
    if btl == "self,tcp":
        # btl/tcp copies sends once the socket is full, and its copies stay within
        # the limit (each with its bookkeeping), before progress and after.
        assert 0 < result["copied"] + QUEUED_COST * result["copied_count"] <= LIMIT, result
        assert result["held"] + QUEUED_COST * result["held_count"] <= LIMIT, result
    assert "to rank 1" in result["timed_out"] and "within 1 s" in result["timed_out"], result
    assert result["waited"], result  # the blocking send returned only once rank 1 read
    assert result["sizes"] == [SIZE], result  # the pending isends completed later, whole


def test_queued_sends_name_the_peer_tag_and_size(pmca_env) -> None:
    # What finalize reports as undelivered: the message layer reads its own
    # tag and size back from each queued message's head.
    import pmca
    from pmca.p2p import _protocol as proto

    with pmca.Session(mca={"btl": "self"}) as s:
        bml = s._data_path().bml
        for tag, size in ((3, 10), (4, 0), (4, 100)):
            s.p2p.isend(0, tag, bytes(size))  # self delivers at the next progress
        queued = bml.queued_sends(0)
        seen = [
            (q.rank, q.completed, q.nbytes, *proto.MATCH.unpack_from(q.head)[3:]) for q in queued
        ]
        match = proto.MATCH.size
        assert seen == [
            (0, True, match + 10, 3, 10),
            (0, True, match, 4, 0),
            (0, True, match + 100, 4, 100),
        ], seen
        assert bml.queued_sends(1) == []
        for tag, size in ((3, 10), (4, 0), (4, 100)):
            assert s.p2p.recv(0, tag, bytearray(size), timeout=30) == size
        assert bml.queued_sends() == []
