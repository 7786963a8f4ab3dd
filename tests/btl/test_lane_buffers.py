"""Blocking ``send``/``recv`` through a lane take the caller's buffer object as it is.

A lane's native call reads the sender's buffer where it lies and lands the
receiver's message straight in the receiver's buffer, whatever exports it.
Each case runs a ping-pong between two real processes, every message
checked byte for byte, and counts through the btl's own counters that the
eager messages went through the lanes (so a lane that stopped taking a
kind of buffer fails here, not only slows down). Buffers a lane cannot use
go the general way, which names what is wrong with them; a message larger
than the receive buffer is reported as truncated and the stream goes on.
"""

from __future__ import annotations

import pytest

from ._pairs import BTLS
from ._pairs import pair as _pair

pytest.importorskip("numpy")

#: Buffers of every kind, and the receivers' counters of the lanes (shared by the cases).
_BUFFERS = """
import array
import numpy as np
from pmca.p2p import TruncationError

NAME = BTL.split(",")[1]
PEER = 1 - RANK

def pattern(size, mark):
    return bytes((mark * 7 + i) % 251 for i in range(size))

def receivers(size):
    # (label, a buffer of `size` bytes of that kind, its bytes)
    kinds = [
        ("bytes", bytearray(size), lambda b: bytes(b)),
        ("bytearray", bytearray(size), lambda b: bytes(b)),
        ("memoryview", memoryview(bytearray(size)), lambda b: b.tobytes()),
        ("array B", array.array("B", bytes(size)), lambda b: b.tobytes()),
        ("numpy uint8", np.zeros(size, np.uint8), lambda b: b.tobytes()),
        ("numpy slice", np.zeros(size + 16, np.uint8)[8 : 8 + size], lambda b: b.tobytes()),
    ]
    if size % 16 == 0:
        kinds += [
            ("array d", array.array("d", bytes(size)), lambda b: b.tobytes()),
            ("numpy float64 2-D", np.zeros((2, size // 16)), lambda b: b.tobytes()),
            ("memoryview I", memoryview(bytearray(size)).cast("I"), lambda b: b.tobytes()),
        ]
    return kinds

def as_kind(label, data):
    # the same kind of object as the receiver's, holding `data` (read-only where it can be)
    if label == "bytes":
        return data
    if label == "bytearray":
        return bytearray(data)
    if label == "memoryview":
        return memoryview(data)  # read-only
    if label in ("array B", "array d"):
        return array.array(label[-1], data)
    if label == "numpy uint8":
        return np.frombuffer(data, np.uint8)  # read-only
    if label == "numpy slice":
        return np.frombuffer(bytes(8) + data + bytes(8), np.uint8)[8 : 8 + len(data)]
    if label == "numpy float64 2-D":
        return np.frombuffer(data, np.float64).reshape(2, -1).copy()
    return memoryview(bytearray(data)).cast("I")

def lane_counts(s):
    ps = s.pvar_session()
    names = ("lane_messages_sent", "lane_messages_received")
    handles = [ps.handle(f"btl_{NAME}_{n}", obj=PEER) for n in names]
    return lambda: [h.read() for h in handles]

def warm_up(s):
    # one message each way: both lanes are open before anything is counted
    s.p2p._set_lane_spin(0.05)  # what is counted is under test, not the spin
    warm = bytearray(1)
    if RANK == 0:
        s.p2p.send(PEER, 1, b"w"); s.p2p.recv(PEER, 1, warm)
    else:
        s.p2p.recv(PEER, 1, warm); s.p2p.send(PEER, 1, b"w")
    WORLD.barrier(timeout=60)

def every_kind(s, sizes):
    # a ping-pong of every kind of buffer of every size, each message checked:
    # (what arrived wrong, how many messages each side sent)
    wrong, messages, mark = [], 0, 0
    for size in sizes:
        for label, into, got in receivers(size):
            mark += 1
            data = pattern(size, mark)
            if RANK == 0:
                s.p2p.send(PEER, 2, as_kind(label, data))
                n = s.p2p.recv(PEER, 3, into, timeout=60)
            else:
                n = s.p2p.recv(PEER, 2, into, timeout=60)
                s.p2p.send(PEER, 3, into)  # back from the receiver's own buffer
            messages += 1
            if n != size or got(into) != data:
                wrong.append([label, size, n])
    return wrong, messages
"""

_KINDS = (
    _BUFFERS
    + """
with pmca.Session(mca=MCA, frameworks=["btl"], world=WORLD) as s:
    warm_up(s)
    counts = lane_counts(s)
    before = counts()
    wrong, messages = every_kind(s, SIZES)
    WORLD.barrier(timeout=60)
    after = counts()
    out(wrong=wrong, messages=messages, lanes=[a - b for a, b in zip(after, before)])

    # exactly the lane's eager payload each way (a long spin: nothing may miss the lane)
    limit = s.p2p._lanes[PEER].payload_limit
    s.p2p._set_lane_spin(1.0)
    edge = np.zeros(limit, np.uint8)
    WORLD.barrier(timeout=60)
    before = counts()
    if RANK == 0:
        s.p2p.send(PEER, 6, np.full(limit, 7, np.uint8))
        n = s.p2p.recv(PEER, 6, edge)
    else:
        n = s.p2p.recv(PEER, 6, edge)
        s.p2p.send(PEER, 6, edge)
    after = counts()
    out(edge=[n == limit, bool((edge == 7).all()), [a - b for a, b in zip(after, before)]])
    WORLD.barrier(timeout=60)

    # a message larger than the receive buffer, then the stream goes on
    if RANK == 0:
        s.p2p.send(PEER, 4, np.arange(100, dtype=np.uint8))
        s.p2p.send(PEER, 4, np.arange(3, dtype=np.uint8))
        s.p2p.send(PEER, 4, np.arange(5, dtype=np.uint8))
    else:
        small = np.zeros(10, np.uint8)
        truncated = []
        for into in (small, np.zeros(0, np.uint8)):
            try:
                s.p2p.recv(PEER, 4, into)
                truncated.append("no error")
            except TruncationError as error:
                truncated.append(str(error))
        out(truncated=truncated)
        n = s.p2p.recv(PEER, 4, small)
        out(after_truncation=[n, small[:n].tolist()])
    WORLD.barrier(timeout=60)

    # buffers a lane cannot use: the general way names them; the stream goes on
    if RANK == 0:
        try:
            s.p2p.send(PEER, 5, np.arange(20, dtype=np.uint8)[::2])
        except ValueError as error:
            out(strided=str(error))
        s.p2p.send(PEER, 5, b"next")
    else:
        try:
            s.p2p.recv(PEER, 5, b"read-only")
        except TypeError as error:
            out(read_only=str(error))
        into = np.zeros(4, np.uint8)
        out(after_refusals=[s.p2p.recv(PEER, 5, into), into.tobytes().decode()])
    WORLD.barrier(timeout=60)
"""
)

#: Eager on every lane (the lanes' own path), counted.
_EAGER_SIZES = [0, 1, 16, 1000]  # 1000 is no multiple of 16


@pytest.mark.parametrize("btl", BTLS)
def test_every_buffer_kind_goes_through_the_lane_as_it_is(pmca_env, tmp_path, btl) -> None:
    """bytes, bytearray, memoryviews (read-only, cast), arrays and numpy arrays (read-only,
    sliced, 2-D float) are sent and received through the lane, each byte in place."""
    body = f"SIZES = {_EAGER_SIZES!r}\n" + _KINDS
    sender, receiver = _pair(tmp_path, body, btl, timeout=180)
    assert sender["returncode"] == 0 and receiver["returncode"] == 0, (sender, receiver)
    for side in (sender, receiver):
        assert side["wrong"] == [], side
        # six kinds of every size, three more of sizes that are multiples of 16
        assert side["messages"] == 9 + 6 + 9 + 6, side
        sent, received = side["lanes"]
        # nothing is ever queued ahead in a ping-pong: every send takes its lane
        assert sent == side["messages"], side
        # a receive that waited past the spin becomes a request; most land in the lane
        assert received > side["messages"] // 2, side
        # the exact eager payload goes through the lanes both ways, whole
        assert side["edge"] == [True, True, [1, 1]], side
    too_large, into_empty = receiver["truncated"]
    assert "100 bytes" in too_large and "the 10-byte receive buffer" in too_large, receiver
    assert "3 bytes" in into_empty and "the 0-byte receive buffer" in into_empty, receiver
    assert receiver["after_truncation"] == [5, [0, 1, 2, 3, 4]], receiver
    assert "not C-contiguous" in sender["strided"], sender
    assert "read-only" in receiver["read_only"], receiver
    assert receiver["after_refusals"] == [4, "next"], receiver


_OWED_FIN = """
import numpy as np

SIZE = 1 << 16  # a rendezvous the receiving lane reads itself (CMA)
# rank 1's fragments: four eager ones, then (a smaller message takes a larger one) one more
MCA["btl_sm_eager_fragments"] = "4"
MCA["btl_sm_max_fragments"] = "1"
FRAGMENTS = 5
with pmca.Session(mca=MCA, frameworks=["btl"], world=WORLD) as s:
    warm = bytearray(1)
    if RANK == 0:
        s.p2p.send(1, 1, b"w"); s.p2p.recv(1, 1, warm)
        s.p2p.iprobe(1, 9)  # a poll: hands rank 1's fragment of that "w" back
    else:
        s.p2p.recv(0, 1, warm); s.p2p.send(0, 1, b"w")
    WORLD.barrier(timeout=60)
    if RANK == 0:
        pending = s.p2p.isend(1, 2, np.full(SIZE, 5, np.uint8))
        WORLD.barrier(timeout=60)  # rank 1 fills our FIFO with its fragments, reads, owes the FIN
        WORLD.barrier(timeout=60)
        try:
            pending.wait(timeout=30)
            out(sent="completed")
        except TimeoutError:
            out(sent="no FIN")
        s.p2p.send(1, 3, b"done")
        for _ in range(FRAGMENTS):
            s.p2p.recv(1, 4, bytearray(1), timeout=30)
    else:
        WORLD.barrier(timeout=60)
        for _ in range(FRAGMENTS):  # every fragment of ours, left unread in rank 0's FIFO
            s.p2p.send(0, 4, b"x")
        into = np.zeros(SIZE, np.uint8)
        ps = s.pvar_session()
        names = ("lane_messages_received", "rdma_operations", "messages_sent")
        counts = [ps.handle(f"btl_sm_{name}", obj=0) for name in names]
        n = s.p2p.recv(0, 2, into, timeout=30)  # the lane reads it; its FIN finds no fragment
        out(lane=[h.read() for h in counts])
        WORLD.barrier(timeout=60)
        done = bytearray(4)
        s.p2p.recv(0, 3, done, timeout=60)
        out(received=[n, bool((into == 5).all()), bytes(done).decode()])
    WORLD.barrier(timeout=60)
"""


@pytest.mark.skipif("self,sm" not in BTLS, reason="needs btl sm")
def test_a_fin_the_lane_could_not_send_is_sent_by_the_message_layer(pmca_env, tmp_path) -> None:
    """A rendezvous the receiving lane read while every fragment of the receiver's was
    in the sender's FIFO: the lane cannot send the FIN, the message layer queues it, and
    the sender's send completes once it takes its FIFO's messages."""
    sender, receiver = _pair(tmp_path, _OWED_FIN, "self,sm", timeout=180)
    assert sender["returncode"] == 0 and receiver["returncode"] == 0, (sender, receiver)
    assert receiver["received"] == [1 << 16, True, "done"], receiver
    # the lane landed it and read its payload, and sent nothing: the FIN went later
    assert receiver["lane"] == [1, 1, 0], receiver
    assert sender["sent"] == "completed", sender


_RENDEZVOUS = (
    _BUFFERS
    + """
MCA["btl_sm_single_copy_mechanism"] = MECHANISM
with pmca.Session(mca=MCA, frameworks=["btl"], world=WORLD) as s:
    warm_up(s)
    sm = next(m for m in s.modules("btl") if m.name == "sm")
    limit = s.p2p._lanes[PEER].payload_limit
    assert min(SIZES) > limit, (SIZES, limit)
    counts = lane_counts(s)
    before = counts()
    wrong, messages = every_kind(s, SIZES)
    WORLD.barrier(timeout=60)
    after = counts()
    out(
        wrong=wrong,
        messages=messages,
        lanes=[a - b for a, b in zip(after, before)],
        live=len(sm._registrations._live),  # every rendezvous's registration ended
        mechanism=sm.mechanism,
    )
    WORLD.barrier(timeout=60)
"""
)

#: Rendezvous sizes (above the lanes' eager payload): one byte over 64 KiB, 256 KiB.
_RENDEZVOUS_SIZES = [(1 << 16) + 16, 1 << 18]


@pytest.mark.skipif("self,sm" not in BTLS, reason="needs btl sm")
@pytest.mark.parametrize("mechanism", ["cma", "emulated"])
def test_a_rendezvous_send_announces_every_buffer_kind_where_it_lies(
    pmca_env, tmp_path, mechanism: str
) -> None:
    """A blocking send above the eager payload sends its rendezvous header through the
    lane, naming the caller's buffer where it lies (address and size packed natively
    with its registration key): the receiver reads it with CMA, or (emulated) asks the
    sender, whose registration of that key must cover exactly that range. Every kind
    of buffer, every byte checked; each registration ends with its FIN."""
    body = f"SIZES = {_RENDEZVOUS_SIZES!r}\nMECHANISM = {mechanism!r}\n" + _RENDEZVOUS
    sender, receiver = _pair(tmp_path, body, "self,sm", timeout=180)
    assert sender["returncode"] == 0 and receiver["returncode"] == 0, (sender, receiver)
    for side in (sender, receiver):
        assert side["wrong"] == [], side
        assert side["messages"] == 2 * 9, side
        assert side["mechanism"] == mechanism, side
        sent, received = side["lanes"]
        assert sent == side["messages"], side  # every header went through the lane
        # (received: the FINs the lanes took, and with CMA the rendezvous they read)
        assert received > side["messages"] // 2, side
        assert side["live"] == 0, side
