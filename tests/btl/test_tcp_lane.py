"""btl/tcp's lanes (a real Connection and TcpLane over loopback TCP): the awaited
eager frame is taken from the connection's buffer however the stream cuts it,
anything else stays for the general path in order, and what a peer claims about
lengths is checked before a byte of it is used."""

from __future__ import annotations

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
from pmca.btl.tcp._connection import Connection
from pmca.btl.tcp._lane import LANDED, NOTHING, OTHER, TcpLane
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
    assert pair.lane.send(0, 0, 0, b"x", 1) == 1  # and a send


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


def _peer_of(pair: _Pair) -> Connection:
    """A Connection on the sending socket, to send with a lane."""
    rail = _Rail()
    connection = Connection(rail, 0, pair.sender, zerocopy=False, queue_limit=1 << 30)  # type: ignore[arg-type]
    rail.fds = [connection.fd]
    return connection


def test_send_writes_what_the_general_path_writes(pair: _Pair) -> None:
    sending = _peer_of(pair)
    lane = TcpLane(_Rail(), sending, _AM_TAG)  # type: ignore[arg-type]
    assert lane.send(6, _TAG & 0xFFFFFFFF, _TAG >> 32, b"payload", 7) == 0
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
    assert lane.send(sequence, 1, 0, b"x", 1) == 1  # behind the queue: the general way
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
