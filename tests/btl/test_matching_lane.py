"""A blocking receive's one-call path (a btl's lane) keeps MPI's matching order.

A blocking ``recv`` of a specific source and tag polls the btl's lane itself
and so takes the next message of that stream straight off the btl's queue;
it must not when a receive posted earlier, a wildcard one included, accepts
that message: MPI gives a message to the earliest-posted receive that
matches it. Each case here has the messages waiting in the btl's queue
(nothing progressed them) when the wildcard receive is posted, so only the
blocking receive's own check keeps it from taking the first one.

The self btl has no lane: its order is tested in one process (test_matching).
A tcp lane lands nothing in place (a receive into a buffer larger than its
payload limit goes the general way), so there cases 3 to 6 hold either way.
"""

from __future__ import annotations

import pytest

from ._pairs import BTLS
from ._pairs import pair as _pair

_WILDCARD_FIRST = """
from pmca.p2p import ANY_SOURCE, ANY_TAG, wait_all
EAGER, RENDEZVOUS = 16, 100_000
# (tag, wildcard, message size, buffer size): a buffer larger than the lane's
# payload limit makes the lane land the message in place (its other call).
CASES = [
    (1, "source", EAGER, EAGER),
    (2, "tag", EAGER, EAGER),
    (3, "source", EAGER, RENDEZVOUS),
    (4, "tag", EAGER, RENDEZVOUS),
    (5, "source", RENDEZVOUS, RENDEZVOUS),
    (6, "tag", RENDEZVOUS, RENDEZVOUS),
]
MCA["btl_tcp_eager_limit"] = "32k"  # the larger size is a rendezvous on every btl
with pmca.Session(mca=MCA, frameworks=["btl"], world=WORLD) as s:
    for tag, wildcard, size, capacity in CASES:
        if RANK == 0:
            sends = [s.p2p.isend(1, tag, mark * size) for mark in (b"1", b"2")]
            WORLD.barrier(timeout=60)
            wait_all(sends, timeout=60)
        else:
            WORLD.barrier(timeout=60)  # both are in the btl's queue, none progressed
            first, second = bytearray(capacity), bytearray(capacity)
            source, accepted = (ANY_SOURCE, tag) if wildcard == "source" else (0, ANY_TAG)
            wild = s.p2p.irecv(source, accepted, first)
            got = s.p2p.recv(0, tag, second, timeout=60)
            wild.wait(timeout=60)
            out(**{f"case{tag}": [first[:1].decode(), second[:1].decode(), got]})
        WORLD.barrier(timeout=60)
"""


@pytest.mark.parametrize("btl", BTLS)
def test_a_wildcard_posted_first_takes_the_message_before_a_blocking_recv(
    pmca_env, tmp_path, btl
) -> None:
    """``irecv(ANY_SOURCE or ANY_TAG)`` then ``recv(0, tag)``: the wildcard gets message 1.

    With the lane's check for posted wildcard receives removed, the blocking
    receive took message 1 and the wildcard message 2.
    """
    sender, receiver = _pair(tmp_path, _WILDCARD_FIRST, btl, timeout=120)
    assert sender["returncode"] == 0 and receiver["returncode"] == 0, (sender, receiver)
    sizes = {1: 16, 2: 16, 3: 16, 4: 16, 5: 100_000, 6: 100_000}
    taken = {tag: receiver.get(f"case{tag}") for tag in sizes}
    assert taken == {tag: ["1", "2", size] for tag, size in sizes.items()}, receiver


_STREAM_AHEAD = """
EAGER, LARGE = 16, 100_000
# (tag, what is ahead of the blocking receive, buffer size)
CASES = [
    (1, "posted", EAGER),
    (2, "posted", LARGE),
    (3, "unexpected", EAGER),
    (4, "unexpected", LARGE),
]
with pmca.Session(mca=MCA, frameworks=["btl"], world=WORLD) as s:
    for tag, ahead, capacity in CASES:
        if RANK == 0:
            sends = [s.p2p.isend(1, tag, b"1" * EAGER)]
            if ahead == "posted":
                sends.append(s.p2p.isend(1, tag, b"2" * EAGER))
            WORLD.barrier(timeout=60)
            WORLD.barrier(timeout=60)  # the receiver holds message 1 as unexpected
            if ahead == "unexpected":
                sends.append(s.p2p.isend(1, tag, b"2" * EAGER))
            WORLD.barrier(timeout=60)
            wait_all(sends, timeout=60)
        else:
            first, second = bytearray(capacity), bytearray(capacity)
            WORLD.barrier(timeout=60)
            if ahead == "unexpected":
                s.p2p.probe(0, tag, timeout=60)  # message 1 is taken off the btl's queue
            WORLD.barrier(timeout=60)
            WORLD.barrier(timeout=60)  # message 2 waits in the btl's queue
            earlier = s.p2p.irecv(0, tag, first) if ahead == "posted" else None
            s.p2p.recv(0, tag, second if earlier else first, timeout=60)
            if earlier:
                earlier.wait(timeout=60)
            else:
                s.p2p.recv(0, tag, second, timeout=60)
            out(**{f"case{tag}": [first[:1].decode(), second[:1].decode()]})
        WORLD.barrier(timeout=60)
"""


@pytest.mark.parametrize("btl", BTLS)
def test_a_blocking_recv_never_overtakes_its_own_streams_earlier_message(
    pmca_env, tmp_path, btl
) -> None:
    """Message 1 of the stream is posted for or already unexpected: ``recv`` gets message 2.

    A specific ``irecv(0, tag)`` posted before ``recv(0, tag)`` takes message 1;
    a message 1 a probe already took off the btl's queue is the blocking
    receive's, not message 2 behind it in the queue. With the lane's check for
    that stream's posted (or unexpected) messages removed, the blocking receive
    took message 1 (message 2).
    """
    sender, receiver = _pair(
        tmp_path, "from pmca.p2p import wait_all\n" + _STREAM_AHEAD, btl, timeout=120
    )
    assert sender["returncode"] == 0 and receiver["returncode"] == 0, (sender, receiver)
    taken = {tag: receiver.get(f"case{tag}") for tag in (1, 2, 3, 4)}
    assert taken == {tag: ["1", "2"] for tag in (1, 2, 3, 4)}, receiver


_REFUSED_THOUGH_IT_WAITS = """
with pmca.Session(mca=MCA, frameworks=["btl"], world=WORLD) as s:
    if RANK == 0:
        s.p2p.send(1, 7, b"waiting")
        s.p2p.send(1, 1, b"one")
        WORLD.barrier(timeout=60)
        WORLD.barrier(timeout=60)
    else:
        WORLD.barrier(timeout=60)  # the messages wait in the btl's queue
        refused = []
        calls = [(bytearray(16), 7, -1.0), (bytes(16), 7, 60), (bytearray(16), True, 60)]
        calls.append((bytearray(16), (1 << 64) + 7, 60))  # tag 7 in 32-bit halves
        for buf, tag, timeout in calls:
            try:
                s.p2p.recv(0, tag, buf, timeout=timeout)
                refused.append("taken")
            except (TypeError, ValueError) as exc:
                refused.append(str(exc))
        got = []
        for tag in (7, 1):
            buf = bytearray(16)
            try:  # already here: a wait means a refused call took it
                got.append(buf[: s.p2p.recv(0, tag, buf, timeout=10)].decode())
            except TimeoutError:
                got.append(None)
        out(refused=refused, got=got)
        WORLD.barrier(timeout=60)
"""


@pytest.mark.parametrize("btl", BTLS)
def test_bad_arguments_are_refused_though_the_lane_holds_the_message(
    pmca_env, tmp_path, btl
) -> None:
    """A negative timeout, a read-only buffer, a ``bool`` tag or one past ``TAG_UB``
    is refused, and the messages stay.

    Checked before the lane is polled: with the timeout check skipped when a
    timeout is given, or a read-only ``bytes`` used as the landing place, the
    lane took the message (or failed on the copy) instead; with the tag's type
    unchecked, ``True`` took tag 1's message, and with its range unchecked the
    sm lane (whose C call keeps 32 bits of each half) took tag 7's for
    ``2**64 + 7``.
    """
    _, receiver = _pair(tmp_path, _REFUSED_THOUGH_IT_WAITS, btl, timeout=120)
    assert receiver["returncode"] == 0, receiver
    timeout, read_only, truth, huge = receiver["refused"]
    assert "timeout -1.0 is not a finite number of seconds" in timeout, receiver
    assert "the receive buffer is read-only (bytes)" in read_only, receiver
    assert "tag True is a bool, not an integer" in truth, receiver
    assert f"tag {(1 << 64) + 7} is outside 0.." in huge, receiver
    assert receiver["got"] == ["waiting", "one"], receiver


_EMPTY = """
from pmca.p2p import ANY_SOURCE
with pmca.Session(mca=MCA, frameworks=["btl"], world=WORLD) as s:
    if RANK == 0:
        for data in (b"", b"after", b"any"):
            s.p2p.send(1, 5, data)
        WORLD.barrier(timeout=60)
    else:
        WORLD.barrier(timeout=60)  # all wait in the btl's queue
        sizes = []
        buf = bytearray(8)
        for source in (0, 0, ANY_SOURCE):
            try:
                sizes.append(s.p2p.recv(source, 5, buf, timeout=10))
            except TimeoutError:
                sizes.append(None)
        out(sizes=sizes, got=buf[:3].decode())
"""


@pytest.mark.parametrize("btl", BTLS)
def test_an_empty_message_is_received_through_the_lane(pmca_env, tmp_path, btl) -> None:
    """A blocking ``recv`` of a 0-byte message waiting in the lane returns 0, the
    next one of the stream follows, and a blocking ``recv(ANY_SOURCE)`` (no lane)
    takes the third. With a landed empty message taken for "nothing landed", the
    receive went the general way and waited for a message already taken."""
    _, receiver = _pair(tmp_path, _EMPTY, btl, timeout=120)
    assert receiver["returncode"] == 0, receiver
    assert receiver["sizes"] == [0, 5, 3] and receiver["got"] == "any", receiver
