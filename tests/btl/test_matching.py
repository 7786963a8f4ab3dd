"""MPI matching in one process (self btl): wildcards, probes, cancel, status, tags, ranks."""

from __future__ import annotations

import threading
from collections.abc import Iterator

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import pmca
from pmca import p2p as pp
from pmca.p2p import ANY_SOURCE, ANY_TAG, TAG_UB, Status, wait_all, wait_any

# sizes on both sides of the self btl's eager limit: eager and rendezvous
_SIZES = (8, 3000, 70_000)
_CAPACITY = max(_SIZES)


@pytest.fixture(scope="module")
def session() -> Iterator[pmca.Session]:
    with pmca.Session(mca={"btl": "self"}, frameworks=["btl"]) as s:
        yield s


def _payload(number: int, size: int) -> bytes:
    return number.to_bytes(4, "little") * (size // 4)


def _model(operations: list[tuple[str, int, int]]) -> dict[int, int]:
    """MPI matching, written plainly: which send each receive takes."""
    posted: list[tuple[int, int]] = []  # (receive number, tag)
    unexpected: list[tuple[int, int]] = []  # (send number, tag)
    matched: dict[int, int] = {}
    for index, (what, tag, _size) in enumerate(operations):
        if what == "send":
            hit = next((p for p in posted if p[1] in (tag, ANY_TAG)), None)
            if hit is None:
                unexpected.append((index, tag))
            else:
                posted.remove(hit)
                matched[hit[0]] = index
        else:
            found = next((u for u in unexpected if tag in (u[1], ANY_TAG)), None)
            if found is None:
                posted.append((index, tag))
            else:
                unexpected.remove(found)
                matched[index] = found[0]
    return matched


_operation = st.tuples(
    st.sampled_from(["send", "recv"]),
    st.sampled_from([0, 1, 2, ANY_TAG]),
    st.sampled_from(_SIZES),
)


@settings(
    max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(st.lists(_operation, max_size=24))
def test_wildcard_and_specific_receives_match_as_mpi_does(session, operations) -> None:
    operations = [(w, 0 if (w == "send" and t == ANY_TAG) else t, s) for w, t, s in operations]
    p2p = session.p2p
    receives: dict[int, tuple[pmca.p2p.Request, bytearray]] = {}
    sends = []
    for index, (what, tag, size) in enumerate(operations):
        if what == "send":
            sends.append(p2p.isend(0, tag, _payload(index, size)))
        else:
            out = bytearray(_CAPACITY)
            receives[index] = (p2p.irecv(0, tag, out), out)
    expected = _model(operations)
    for index, send_index in expected.items():
        request, out = receives[index]
        status = request.status if request.test() else None
        request.wait(timeout=30)
        status = request.status
        _, tag, size = operations[send_index]
        assert status == Status(0, tag, size), (index, send_index)
        assert out[:size] == _payload(send_index, size)
    unmatched = [request for index, (request, _) in receives.items() if index not in expected]
    for request in unmatched:
        assert not request.test()
        assert request.cancel()
        assert request.wait(timeout=5) == 0 and request.status.cancelled
    # what no receive took is still there, in order, for wildcard receives
    left = sorted(set(range(len(operations))) - set(expected.values()))
    left = [i for i in left if operations[i][0] == "send"]
    for send_index in left:
        out = bytearray(_CAPACITY)
        status = p2p.recv(ANY_SOURCE, ANY_TAG, out, timeout=30, status=True)
        _, tag, size = operations[send_index]
        assert status == Status(0, tag, size)
        assert out[:size] == _payload(send_index, size)
    assert p2p.iprobe(ANY_SOURCE, ANY_TAG) is None
    wait_all(sends, timeout=30)


def test_a_wildcard_posted_first_matches_first(session) -> None:
    p2p = session.p2p
    wild, specific = bytearray(16), bytearray(16)
    first = p2p.irecv(ANY_SOURCE, ANY_TAG, wild)
    second = p2p.irecv(0, 5, specific)
    p2p.send(0, 5, b"one")
    p2p.send(0, 5, b"two")
    assert first.wait(timeout=10) == 3 and wild[:3] == b"one"
    assert second.wait(timeout=10) == 3 and specific[:3] == b"two"
    assert first.status == Status(0, 5, 3)


def test_blocking_recv_returns_status_and_probes_see_the_next_message(session) -> None:
    p2p = session.p2p
    assert p2p.iprobe(0, 11) is None
    p2p.send(0, 11, b"abc")
    p2p.send(0, 12, b"defgh")
    assert p2p.iprobe(0, ANY_TAG) == Status(0, 11, 3)
    assert p2p.probe(ANY_SOURCE, 12, timeout=10) == Status(0, 12, 5)
    out = bytearray(8)
    assert p2p.recv(0, ANY_TAG, out, status=True) == Status(0, 11, 3)
    assert p2p.recv(0, 12, out, timeout=10) == 5
    with pytest.raises(TimeoutError, match="probe for rank 0 tag 13 found no message"):
        p2p.probe(0, 13, timeout=0.2)


def test_mprobe_from_two_threads_never_delivers_one_message_twice(session) -> None:
    p2p = session.p2p
    count = 400
    got: list[list[int]] = [[], []]
    errors: list[BaseException] = []

    def take(mine: list[int]) -> None:
        try:
            while True:
                message = p2p.mprobe(ANY_SOURCE, 21, timeout=30)
                out = bytearray(8)
                message.recv(out, timeout=30)
                number = int.from_bytes(out[:4], "little")
                if number == count:
                    return
                mine.append(number)
                with pytest.raises(ValueError, match="already received"):
                    message.irecv(out)
        except BaseException as exc:
            errors.append(exc)

    threads = [threading.Thread(target=take, args=(got[i],)) for i in range(2)]
    for thread in threads:
        thread.start()
    for number in range(count):
        p2p.send(0, 21, number.to_bytes(4, "little"))
    for _ in threads:
        p2p.send(0, 21, count.to_bytes(4, "little"))
    for thread in threads:
        thread.join(timeout=60)
    assert not errors, errors
    assert sorted(got[0] + got[1]) == list(range(count))
    assert got[0] == sorted(got[0]) and got[1] == sorted(got[1])  # per-source order


def test_improbe_message_goes_only_to_its_handle(session) -> None:
    p2p = session.p2p
    assert p2p.improbe(0, 31) is None
    p2p.send(0, 31, b"first")
    p2p.send(0, 31, b"second")
    message = p2p.improbe(0, 31)
    assert message is not None and message.status == Status(0, 31, 5)
    out = bytearray(8)
    assert p2p.recv(0, 31, out, timeout=10) == 6 and out[:6] == b"second"
    assert message.recv(out, status=True) == Status(0, 31, 5) and out[:5] == b"first"


def test_cancel_withdraws_only_unmatched_receives(session) -> None:
    p2p = session.p2p
    out = bytearray(8)
    request = p2p.irecv(0, 41, out)
    assert request.cancel()
    assert request.wait(timeout=1) == 0
    assert request.status == Status(0, 41, 0, None, cancelled=True)
    p2p.send(0, 41, b"kept")  # goes to the next receive, not the cancelled one
    matched = p2p.irecv(0, 41, out)
    assert matched.wait(timeout=10) == 4
    assert not matched.cancel() and not matched.status.cancelled
    send = p2p.isend(0, 42, b"x")
    assert not send.cancel()
    assert p2p.recv(0, 42, out) == 1


def test_cancelling_a_receive_behind_another_of_its_stream_leaves_the_first_posted(
    session,
) -> None:
    """Withdrawing the second receive of a (source, tag) stream removes that one.

    With the first of the stream's queue removed instead, the message went
    unexpected and the first receive never completed.
    """
    p2p = session.p2p
    first, second = bytearray(8), bytearray(8)
    earlier = p2p.irecv(0, 43, first)
    later = p2p.irecv(0, 43, second)
    assert later.cancel() and later.status.cancelled
    p2p.send(0, 43, b"first")
    assert earlier.wait(timeout=5) == 5 and first[:5] == b"first"
    assert p2p.iprobe(0, 43) is None


@pytest.mark.parametrize("tag", [44, ANY_TAG])
def test_a_receive_matched_but_still_reading_cannot_be_cancelled(session, tag) -> None:
    """A rendezvous matched its receive, whose data is not read yet: too late to cancel."""
    p2p = session.p2p
    payload = _payload(7, 70_000)  # beyond the self btl's eager limit
    out = bytearray(len(payload))
    receive = p2p.irecv(0, tag, out)
    send = p2p.isend(0, 44, payload)
    p2p.progress()  # the rendezvous is matched; its data comes with the next progress
    assert not receive.done
    assert not receive.cancel()
    assert receive.wait(timeout=10) == len(payload) and out == payload
    assert not receive.status.cancelled
    send.wait(timeout=10)


def test_wait_any_wait_all_and_test_any(session) -> None:
    p2p = session.p2p
    outs = [bytearray(8) for _ in range(3)]
    receives = [p2p.irecv(0, 50 + i, outs[i]) for i in range(3)]
    assert pp.test_any(receives) is None
    p2p.send(0, 51, b"b")
    assert wait_any(receives, timeout=10) == 1
    p2p.send(0, 52, b"c")
    p2p.send(0, 50, b"a")
    assert wait_all(receives, timeout=10) == [1, 1, 1]
    assert pp.test_any(receives) == 0
    with pytest.raises(ValueError, match="at least one request"):
        wait_any([])


@pytest.mark.parametrize(
    ("tag", "error", "text"),
    [
        (-3, ValueError, "tag -3 is outside 0..4611686018427387903"),
        (TAG_UB + 1, ValueError, f"tag {TAG_UB + 1} is outside"),
        (True, TypeError, "tag True is a bool"),
        (1.0, TypeError, "tag 1.0 is a float"),
        ("7", TypeError, "tag '7' is a str"),
    ],
)
def test_bad_tags_are_named(session, tag, error, text) -> None:
    p2p = session.p2p
    with pytest.raises(error, match=text):
        p2p.send(0, tag, b"x")
    with pytest.raises(error, match=text):
        p2p.irecv(0, tag, bytearray(1))
    with pytest.raises(error, match=text):
        p2p.iprobe(0, tag)


def test_wildcards_only_where_mpi_allows_them(session) -> None:
    p2p = session.p2p
    with pytest.raises(ValueError, match="p2p send: tag -1 is outside"):
        p2p.isend(0, ANY_TAG, b"x")
    with pytest.raises(ValueError, match="p2p send: rank -1 is outside the world"):
        p2p.isend(ANY_SOURCE, 1, b"x")
    with pytest.raises(TypeError, match="rank False is a bool"):
        p2p.irecv(False, 1, bytearray(1))
    with pytest.raises(ValueError, match=r"rank 1 is outside the world \(0..0 or pmca.ANY_SOURCE"):
        p2p.irecv(1, 1, bytearray(1))
    assert pmca.ANY_SOURCE == ANY_SOURCE and pmca.ANY_TAG == ANY_TAG


def test_numpy_integers_are_ranks_and_tags_everywhere(session) -> None:
    numpy = pytest.importorskip("numpy")
    p2p = session.p2p
    out = bytearray(4)
    p2p.send(numpy.int64(0), numpy.uint16(60), b"np")
    assert p2p.iprobe(numpy.int32(0), numpy.int8(60)) == Status(0, 60, 2)
    assert p2p.recv(numpy.int32(0), numpy.int64(60), out, status=True) == Status(0, 60, 2)
    p2p.isend(0, TAG_UB, b"ub").wait(timeout=10)
    assert p2p.recv(0, numpy.int64(TAG_UB), out) == 2
