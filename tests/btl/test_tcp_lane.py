"""btl/tcp's lanes (a real Connection and TcpLane over loopback TCP): the awaited
eager frame is taken from the connection's buffer however the stream cuts it,
anything else stays for the general path in order, what a peer claims about
lengths is checked before a byte of it is used, and a send the connection could
not take as the general path would (queue limit, write size, writes ended) goes
the general way."""

from __future__ import annotations

import ctypes
import select
import socket
import threading
import time
from collections.abc import Iterator
from typing import Any

import pytest

from pmca.btl.base._pvars import BYTES_SENT, MESSAGES_SENT
from pmca.btl.tcp import DEFAULTS
from pmca.btl.tcp import _wire as wire
from pmca.btl.tcp._bulk import STREAM_MIN
from pmca.btl.tcp._connection import QUEUED_COST, Connection
from pmca.btl.tcp._lane import _GENERAL, LANDED, LARGE, NOTHING, OTHER, TcpLane
from pmca.p2p import _protocol as proto

_AM_TAG = 9
_TAG = (5 << 32) | 7  # a tag with both halves set


class _Rail:
    """The module side: records what the general path is handed."""

    limits = DEFAULTS
    streams_placed = 0
    streams_staged = 0

    def __init__(self) -> None:
        self.dispatched: list[tuple[int, int, bytes]] = []
        self.lost: list[BaseException] = []
        self.fds: list[int] = []

    def spin_fds(self) -> list[int] | None:
        return self.fds

    def dispatch(self, connection: Any, kind: int, tag: int, aux: int, body: memoryview) -> None:
        self.dispatched.append((kind, tag, bytes(body)))

    def place(self, connection: Any, tag: int, head: memoryview, length: int) -> None:
        return None

    def connection_lost(self, connection: Any, failure: BaseException) -> None:
        self.lost.append(failure)

    def landed(self, connection: Any) -> None:
        """No flow control here (nothing holds what arrives)."""


class _Pair:
    def __init__(self) -> None:
        listener = socket.create_server(("127.0.0.1", 0))
        self.sender = socket.create_connection(listener.getsockname())
        receiver, _ = listener.accept()
        listener.close()
        self.sender.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.rail = _Rail()
        self.connection = Connection(self.rail, 1, receiver, zerocopy=False)  # type: ignore[arg-type]
        self.rail.fds = [self.connection.fd]
        self.lane = TcpLane(self.rail, self.connection, _AM_TAG)  # type: ignore[arg-type]
        self.lane.set_spin(5.0)  # a bound only: every wait here ends when input comes

    def send(self, data: bytes) -> None:
        self.sender.sendall(data)

    def close(self) -> None:
        self.connection.close()
        self.sender.close()


@pytest.fixture
def pair() -> Iterator[_Pair]:
    made = _Pair()
    try:
        yield made
    finally:
        made.close()


def _eager(sequence: int, tag: int, payload: bytes, *, size: int | None = None) -> bytes:
    """An eager message as the general path sends it: frame, p2p's match header, payload."""
    body = proto.MATCH.pack(proto.EAGER, 0, sequence, tag, len(payload) if size is None else size)
    body += payload
    return wire.FRAME.pack(wire.AM, _AM_TAG, len(body), 0) + body


def _receive(lane: TcpLane, sequence: int, tag: int = _TAG) -> int:
    return lane.receive(sequence, tag & 0xFFFFFFFF, tag >> 32)


def test_the_lane_speaks_the_message_layers_match_header() -> None:
    assert wire.MATCH.format == proto.MATCH.format
    assert wire.EAGER == proto.EAGER
    assert wire.LANE_HEAD.size == wire.FRAME.size + wire.MATCH.size


def test_a_frame_split_at_every_byte_lands_whole(pair: _Pair) -> None:
    """The awaited frame arriving in two pieces, cut at each byte in turn: nothing
    lands before the last byte, then exactly that payload; the frame behind it
    stays for the general path, which is told it waits."""
    lane, connection = pair.lane, pair.connection
    payload = bytes(range(97))
    for sequence, cut in enumerate(range(1, len(_eager(0, _TAG, payload)))):
        frame = _eager(sequence, _TAG, payload)
        pair.send(frame[:cut])
        lane.set_spin(0.0)
        deadline = time.monotonic() + 10
        while connection.end - connection.start < cut:  # let the first piece in
            assert _receive(lane, sequence) == NOTHING
            assert time.monotonic() < deadline
        assert not connection.frames_waiting
        lane.set_spin(5.0)
        pair.send(frame[cut:] + _eager(sequence + 1, 3, b"next"))
        assert _receive(lane, sequence) == LANDED + len(payload)
        assert bytes(lane.landing) == payload
        # Frames the lane read beyond its own show on no poll: the connection knows.
        assert connection.frames_waiting == connection.holds_frame()
        deadline = time.monotonic() + 10
        while not pair.rail.dispatched:
            connection.receive()
            assert time.monotonic() < deadline
        kind, tag, body = pair.rail.dispatched.pop()
        assert (kind, tag) == (wire.AM, _AM_TAG)
        assert proto.MATCH.unpack_from(body)[2:4] == (sequence + 1, 3)
        assert not connection.frames_waiting
    assert not pair.rail.dispatched and not pair.rail.lost


def test_other_frames_first_are_handed_on_in_order(pair: _Pair) -> None:
    lane = pair.lane
    control = proto.FIN_MSG.pack(proto.FIN, 0, 12)  # shorter than a match header
    pair.send(
        wire.FRAME.pack(wire.AM, _AM_TAG, len(control), 0)
        + control
        + wire.FRAME.pack(wire.AM, _AM_TAG + 1, 3, 0)  # another active-message tag
        + b"abc"
        + _eager(3, _TAG + 1, b"other tag")  # the awaited sequence, another tag
        + _eager(4, _TAG, b"mine")
        + _eager(5, _TAG, b"after")
    )
    for _ in range(3):
        assert _receive(lane, 3) == OTHER
        lane.hand_on()
    # the general path took sequence 3 (another tag): the caller awaits 4 now
    assert _receive(lane, 4) == LANDED + 4
    assert bytes(lane.landing) == b"mine"
    rail = pair.rail
    assert [tag for _kind, tag, _body in rail.dispatched] == [_AM_TAG, _AM_TAG + 1, _AM_TAG]
    assert rail.dispatched[0][2] == control
    assert rail.dispatched[1][2] == b"abc"
    assert proto.MATCH.unpack_from(rail.dispatched[2][2])[2:4] == (3, _TAG + 1)
    assert pair.connection.frames_waiting  # "after" is in the buffer
    assert _receive(lane, 5) == LANDED + 5
    assert bytes(lane.landing) == b"after"
    assert not pair.connection.frames_waiting


def test_a_peer_lying_about_a_length_is_left_to_the_general_path(pair: _Pair) -> None:
    """A match header whose size disagrees with the frame: never landed, handed on
    as it came (the general path judges it); a frame claiming more than a parsed
    frame may hold: not touched at all."""
    lane, connection = pair.lane, pair.connection
    lie = _eager(0, _TAG, b"12345678", size=1 << 40)
    pair.send(lie)
    assert _receive(lane, 0) == OTHER
    lane.hand_on()
    assert pair.rail.dispatched == [(wire.AM, _AM_TAG, lie[wire.FRAME.size :])]
    pair.send(_eager(0, _TAG, b"1234", size=2))  # shorter than it is
    assert _receive(lane, 0) == OTHER
    lane.hand_on()
    big = wire.FRAME.pack(wire.AM, _AM_TAG, STREAM_MIN + 1, 0)
    pair.send(big + proto.MATCH.pack(proto.EAGER, 0, 0, _TAG, STREAM_MIN + 1 - 24))
    deadline = time.monotonic() + 10
    while connection.end - connection.start < wire.LANE_HEAD.size:
        assert _receive(lane, 0) in (NOTHING, OTHER)
        assert time.monotonic() < deadline
    before = (connection.start, connection.end)
    assert _receive(lane, 0) == NOTHING  # a streamed message: the general way places it
    assert (connection.start, connection.end) == before
    assert connection.frames_waiting
    garbage = wire.FRAME.pack(77, 0, 4, 0) + b"junk"
    other = _Pair()
    try:
        other.send(garbage + _eager(0, _TAG, b"x"))
        while other.connection.end - other.connection.start < len(garbage):
            assert _receive(other.lane, 0) == NOTHING
        assert _receive(other.lane, 0) == NOTHING  # an unknown kind is not skipped
        other.connection.receive()  # the general path names it
        assert other.rail.lost and "unknown frame kind 77" in str(other.rail.lost[0])
        assert not other.rail.dispatched
    finally:
        other.close()


def test_a_receive_larger_than_any_eager_message_goes_the_general_way(pair: _Pair) -> None:
    """It waits for a rendezvous (the general path matches one as it arrives): the
    lane answers at once and takes nothing, even an eager message that is there."""
    pair.send(_eager(0, _TAG, b"small"))
    deadline = time.monotonic() + 10
    while not pair.connection.holds_frame():
        pair.connection.read()
        assert time.monotonic() < deadline
    assert pair.lane.receive_into(0, _TAG & 0xFFFFFFFF, _TAG >> 32, 0, 1 << 20) == NOTHING
    assert pair.connection.holds_frame()
    assert not pair.lane.rendezvous


def test_a_lost_peer_sends_the_receive_the_general_way(pair: _Pair) -> None:
    pair.send(_eager(0, _TAG, b"half")[:10])
    pair.sender.close()
    assert _receive(pair.lane, 0) == NOTHING
    assert pair.connection.closed is not None
    assert pair.rail.lost
    assert pair.lane.send(0, 0, 0, b"x", 1) == _GENERAL  # and a send


def test_input_on_another_socket_ends_the_wait(pair: _Pair) -> None:
    other = socket.socketpair()
    try:
        pair.rail.fds = [pair.connection.fd, other[0].fileno()]
        other[1].send(b"!")
        began = time.monotonic()
        assert _receive(pair.lane, 0) == NOTHING
        assert time.monotonic() - began < 4.0  # not the lane's whole spin
        pair.rail.fds = None  # type: ignore[assignment]  # output queued: no spin at all
        assert _receive(pair.lane, 0) == NOTHING
    finally:
        other[0].close()
        other[1].close()


def _peer_of(pair: _Pair, *, queue_limit: int = 1 << 30, bulk_chunk: int = 0) -> Connection:
    """A Connection on the sending socket, to send with a lane."""
    rail = _Rail()
    connection = Connection(
        rail,  # type: ignore[arg-type]
        0,
        pair.sender,
        zerocopy=False,
        queue_limit=queue_limit,
        bulk_chunk=bulk_chunk,
    )
    rail.fds = [connection.fd]
    return connection


def test_send_writes_what_the_general_path_writes(pair: _Pair) -> None:
    sending = _peer_of(pair)
    lane = TcpLane(_Rail(), sending, _AM_TAG)  # type: ignore[arg-type]
    assert lane.send(6, _TAG & 0xFFFFFFFF, _TAG >> 32, b"payload", 7) == 0
    assert not sending.queue and sending.owned == 0  # all written: nothing kept
    assert sending.traffic[MESSAGES_SENT] == 1
    assert sending.traffic[BYTES_SENT] == proto.MATCH.size + 7
    expected = _eager(6, _TAG, b"payload")
    got = b""
    deadline = time.monotonic() + 10
    while len(got) < len(expected):
        got += pair.connection.sock.recv(4096)
        assert time.monotonic() < deadline
    assert got == expected


def test_a_send_the_socket_takes_in_part_is_queued_and_arrives(pair: _Pair) -> None:
    """A full socket: what is not written is queued and sent by progress, in
    order; while it is queued the lane sends nothing."""
    pair.sender.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, 4096)
    sending = _peer_of(pair)
    lane = TcpLane(_Rail(), sending, _AM_TAG)  # type: ignore[arg-type]
    payload = str(list(range(20000))).encode()[: STREAM_MIN - proto.MATCH.size]
    sequence = 0
    while not sending.queue:
        assert lane.send(sequence, 1, 0, payload, len(payload)) == 0
        sequence += 1
        assert sequence < 1000
    assert lane.send(sequence, 1, 0, b"x", 1) == _GENERAL  # behind the queue: the general way
    # the buffer call too; a body above the eager payload is LARGE whatever is queued
    assert lane.send_buffer(sequence, 1, 0, ctypes.py_object(b"x")) == _GENERAL
    too_large = bytes(lane.payload_limit + 1)
    assert lane.send_buffer(sequence, 1, 0, ctypes.py_object(too_large)) == LARGE
    receiver = pair.lane
    receiver.set_spin(0.01)
    received = 0
    deadline = time.monotonic() + 30
    while received < sequence:
        sending.flush()
        status = receiver.receive(received, 1, 0)
        if status == NOTHING:
            assert time.monotonic() < deadline
            continue
        assert status == LANDED + len(payload)
        assert bytes(receiver.landing) == payload
        received += 1
    assert not sending.queue


def test_a_yielding_lane_still_waits_for_its_message(pair: _Pair) -> None:
    """``mpi_yield_when_idle``: the lane yields the processor between polls, and
    still lands a message that comes during its spin."""
    pair.lane.set_spin(5.0, yielding=True)
    timer = threading.Timer(0.05, pair.send, args=(_eager(0, _TAG, b"late"),))
    timer.start()
    try:
        began = time.monotonic()
        assert _receive(pair.lane, 0) == LANDED + 4
        assert time.monotonic() - began >= 0.04
        assert bytes(pair.lane.landing) == b"late"
    finally:
        timer.join()


def _buffered(connection: Connection, count: int) -> None:
    """Read until ``connection``'s buffer holds ``count`` bytes not yet acted on."""
    deadline = time.monotonic() + 10
    while connection.end - connection.start < count:
        connection.read()
        assert time.monotonic() < deadline


def _arrived(pair: _Pair, size: int) -> None:
    """Wait until the receiving lane lands message 0, ``size`` bytes."""
    pair.lane.set_spin(0.01)
    deadline = time.monotonic() + 10
    while (status := _receive(pair.lane, 0, 1)) == NOTHING:
        assert time.monotonic() < deadline
    assert status == LANDED + size


def test_a_send_whose_copy_could_pass_the_queue_limit_goes_the_general_way(
    pair: _Pair,
) -> None:
    """``btl_tcp_send_queue_limit`` bounds what a connection copies of sends its
    socket does not take (bytes plus ``QUEUED_COST`` each): a message whose copy
    could pass it goes the general way, nothing written; one whose copy fits
    exactly is sent through the lane."""
    limit = 4096
    sending = _peer_of(pair, queue_limit=limit)
    lane = TcpLane(_Rail(), sending, _AM_TAG)  # type: ignore[arg-type]
    fits = limit - QUEUED_COST - proto.MATCH.size
    assert lane.send(0, 1, 0, bytes(fits + 1), fits + 1) == _GENERAL
    assert sending.traffic[MESSAGES_SENT] == 0
    assert lane.send(0, 1, 0, bytes(fits), fits) == 0
    _arrived(pair, fits)


def test_a_frame_longer_than_one_write_may_carry_goes_the_general_way(pair: _Pair) -> None:
    """With bulk chunks (``btl_tcp_bulk_chunk``) one write carries a frame of
    ``write_max`` bytes at most: a lane message in a longer frame goes the general
    way (which streams it), one in a frame of exactly that length is sent whole."""
    sending = _peer_of(pair, bulk_chunk=1024)
    lane = TcpLane(_Rail(), sending, _AM_TAG)  # type: ignore[arg-type]
    exact = sending.write_max - wire.FRAME.size - proto.MATCH.size
    assert lane.send(0, 1, 0, bytes(exact + 1), exact + 1) == _GENERAL
    assert sending.traffic[MESSAGES_SENT] == 0
    assert lane.send(0, 1, 0, bytes(exact), exact) == 0
    _arrived(pair, exact)


def test_a_send_after_the_writes_ended_goes_the_general_way(pair: _Pair) -> None:
    """A finalize that gave up cut a frame the socket took part of (``drop_queued``
    shuts the write side): a lane send then goes the general way, which names
    why, and writes nothing: the connection is not lost over it."""
    pair.sender.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, 4096)
    sending = _peer_of(pair)
    lost = sending.module.lost  # type: ignore[attr-defined]
    lane = TcpLane(_Rail(), sending, _AM_TAG)  # type: ignore[arg-type]
    payload = bytes(STREAM_MIN - proto.MATCH.size)
    sequence = 0
    while not sending.queue:
        assert lane.send(sequence, 1, 0, payload, len(payload)) == 0
        sequence += 1
        assert sequence < 1000
    deadline = time.monotonic() + 10
    while not sending.queue[0].started:  # the peer reads a little: part of it goes out
        pair.connection.sock.recv(4096)
        sending.flush()
        assert time.monotonic() < deadline
    assert sending.queue
    sending.drop_queued(RuntimeError("finalize gave up"))
    assert sending.writes_ended and not sending.queue
    assert lane.send(sequence, 1, 0, b"x", 1) == _GENERAL
    assert sending.closed is None and not lost


def test_a_frame_still_coming_behind_another_is_waited_for(pair: _Pair) -> None:
    """The awaited frame starts behind one the general path took: it lands only
    once all of it is here, not from what the buffer held before."""
    lane, connection = pair.lane, pair.connection
    lane.set_spin(0.0)
    awaited = _eager(1, _TAG, b"x" * 200)
    pair.send(_eager(0, _TAG + 1, b"y" * 3000) + awaited[:40])
    _buffered(connection, len(_eager(0, _TAG + 1, b"y" * 3000)) + 40)
    assert _receive(lane, 0) == OTHER
    lane.hand_on()
    assert connection.start > 0
    assert _receive(lane, 1) == NOTHING  # 160 bytes of it still to come
    lane.set_spin(5.0)
    pair.send(awaited[40:])
    assert _receive(lane, 1) == LANDED + 200
    assert bytes(lane.landing) == b"x" * 200


def test_a_frame_of_another_active_message_tag_is_never_landed(pair: _Pair) -> None:
    """A frame of another active-message tag whose body reads like the awaited
    message (match header, sequence, tag, size) is handed on, not landed."""
    lookalike = _eager(0, _TAG, b"not mine")
    lookalike = (
        wire.FRAME.pack(wire.AM, _AM_TAG + 1, len(lookalike) - wire.FRAME.size, 0)
        + (lookalike[wire.FRAME.size :])
    )
    pair.send(lookalike + _eager(0, _TAG, b"mine"))
    assert _receive(pair.lane, 0) == OTHER
    pair.lane.hand_on()
    assert pair.rail.dispatched == [(wire.AM, _AM_TAG + 1, lookalike[wire.FRAME.size :])]
    assert _receive(pair.lane, 0) == LANDED + 4
    assert bytes(pair.lane.landing) == b"mine"


def test_a_whole_large_message_in_the_buffer_is_left_to_the_general_way(pair: _Pair) -> None:
    """A message over ``STREAM_MIN`` is streamed into place by the general way even
    when all of it is already buffered: the lane never lands it."""
    lane, connection = pair.lane, pair.connection
    payload = bytes(range(256)) * ((STREAM_MIN + 256) // 256)
    frame = _eager(0, _TAG, payload)
    pair.send(frame)
    _buffered(connection, len(frame))
    assert _receive(lane, 0) == NOTHING
    assert (connection.start, connection.end - connection.start) == (0, len(frame))


def test_the_lane_reads_nothing_while_a_large_body_streams_in(pair: _Pair) -> None:
    """While the general way receives a large body into its place, the rest of that
    body is its own: the lane answers at once without reading it, and the body
    arrives whole."""
    lane, connection = pair.lane, pair.connection
    lane.set_spin(0.0)
    body = bytes(range(256)) * ((STREAM_MIN + 4096) // 256)
    large = wire.FRAME.pack(wire.AM, _AM_TAG, len(body), 0) + body
    pair.send(large[:1000])
    deadline = time.monotonic() + 10
    while not connection.in_bulk():
        connection.receive()
        assert time.monotonic() < deadline
    pair.send(large[1000:])
    assert select.select([connection.fd], [], [], 10)[0]  # the rest is here to read
    assert _receive(lane, 0) == NOTHING
    while connection.in_bulk():
        connection.receive()
        assert time.monotonic() < deadline
    assert pair.rail.dispatched == [(wire.AM, _AM_TAG, body)]


def test_a_lane_without_the_native_poller_answers_at_once(
    pair: _Pair, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Where bml's spin library is not available (not built, another build) a lane
    never waits: it answers ``NOTHING`` while its frame is not all here, and
    still lands one that is."""
    from pmca.btl.tcp import _lane

    monkeypatch.setattr(_lane, "spinner", lambda: None)
    lane = TcpLane(pair.rail, pair.connection, _AM_TAG)  # type: ignore[arg-type]
    lane.set_spin(5.0)
    assert _receive(lane, 0) == NOTHING
    frame = _eager(0, _TAG, b"here")
    pair.send(frame)
    _buffered(pair.connection, len(frame))
    assert _receive(lane, 0) == LANDED + 4


def test_only_the_awaited_sequence_and_kind_are_landed(pair: _Pair) -> None:
    """The awaited tag in another sequence, or in a rendezvous header whose size
    field happens to equal its body's length, is handed on to the general path."""
    lane = pair.lane
    rendezvous = proto.MATCH.pack(proto.RNDV, 0, 1, _TAG, proto.RNDV_BODY.size)
    rendezvous += proto.RNDV_BODY.pack(77)
    pair.send(
        _eager(0, _TAG, b"earlier")
        + wire.FRAME.pack(wire.AM, _AM_TAG, len(rendezvous), 0)
        + rendezvous
        + _eager(1, _TAG, b"awaited")
    )
    assert _receive(lane, 1) == OTHER
    lane.hand_on()
    assert _receive(lane, 1) == OTHER
    lane.hand_on()
    assert [body for _kind, _tag, body in pair.rail.dispatched] == [
        _eager(0, _TAG, b"earlier")[wire.FRAME.size :],
        rendezvous,
    ]
    assert _receive(lane, 1) == LANDED + 7
    assert bytes(lane.landing) == b"awaited"


def test_a_lost_connection_s_buffer_is_not_landed_from(pair: _Pair) -> None:
    """A whole awaited message was read but not acted on when the connection was
    lost: the general path acts on nothing more from it, and neither does the
    lane (it answers ``NOTHING``; the general way names the failure)."""
    connection = pair.connection
    frame = _eager(0, _TAG, b"too late")
    pair.send(frame)
    pair.sender.close()
    deadline = time.monotonic() + 10
    while connection.closed is None:
        connection.read()
        assert time.monotonic() < deadline
    assert connection.end - connection.start == len(frame)
    assert _receive(pair.lane, 0) == NOTHING
    assert pair.rail.lost


def test_a_short_frame_at_the_end_of_the_buffer_is_handed_on(pair: _Pair) -> None:
    """A frame of the lane's tag shorter than a match header (a FIN), last in a
    full buffer: handed on, never read past its end (there is no more buffer)."""
    connection = pair.connection
    fin = proto.FIN_MSG.pack(proto.FIN, 0, 12)
    last = wire.FRAME.pack(wire.AM, _AM_TAG, len(fin), 0) + fin
    room = len(connection.buffer) - len(last)
    fillers = []
    while room:
        body = min(room - wire.FRAME.size, 60_000)
        fillers.append(wire.FRAME.pack(wire.AM, _AM_TAG + 1, body, 0) + bytes(body))
        room -= wire.FRAME.size + body
    sender = threading.Thread(target=pair.send, args=(b"".join(fillers) + last,))
    sender.start()
    try:
        deadline = time.monotonic() + 30
        while connection.end < len(connection.buffer):
            connection.read()
            assert time.monotonic() < deadline
    finally:
        sender.join()
    for _ in fillers:
        connection.parse_one()
    assert connection.end - connection.start == len(last)
    assert _receive(pair.lane, 0) == OTHER
    pair.lane.hand_on()
    assert pair.rail.dispatched[-1] == (wire.AM, _AM_TAG, fin)
