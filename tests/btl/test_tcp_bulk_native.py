"""btl/tcp reads a large body into the receiver's buffer with its native reader.

Two real processes over loopback tcp: every buffer kind a blocking ``recv``
takes, from every kind of source buffer, at the sizes where the path
changes (the largest message parsed out of the connection's buffer, the
first one streamed into place, the largest eager one, the first rendezvous),
lands byte for byte, and the receiver's ``btl_tcp_native_bytes_received`` counts
at least every byte beyond one read-ahead of each streamed body: those were
read straight into the user's buffer by the native reader, not staged and
copied. A connection whose peer closes mid-body is lost with that said, and
a large body the socket cannot take at once goes out by the native writer.
"""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from pmca.btl.base._pvars import NATIVE_RECEIVED, NATIVE_SENT
from pmca.btl.tcp import DEFAULTS
from pmca.btl.tcp import _wire as wire
from pmca.btl.tcp._connection import _READ_AHEAD, STREAM_MIN, Connection
from pmca.btl.tcp._records import Outgoing
from pmca.p2p import _protocol as proto

from ._pairs import pair
from .test_tcp_readahead import _Owner as _PlacingOwner

_MATCH = proto.MATCH.size
#: Where tcp's receive path changes: parsed from the buffer up to the first, streamed
#: into place above it, eager up to the third, rendezvous (get data) above it.
_SIZES = [
    STREAM_MIN - _MATCH,
    STREAM_MIN - _MATCH + 1,
    (1 << 20) + 3,
    DEFAULTS.eager_limit - _MATCH,
    DEFAULTS.eager_limit - _MATCH + 1,
]

_KINDS = """
import array
try:
    import numpy
except ImportError:
    numpy = None

SIZES = [int(size) for size in sys.argv[4].split(",")]
READ_AHEAD = int(sys.argv[5])
RECEIVERS = ["bytearray", "memoryview", "array"] + (["numpy"] if numpy is not None else [])
SOURCES = ["bytes", "bytearray", "memoryview"] + (["numpy"] if numpy is not None else [])


def pattern(size, seed):
    cycle = bytes((i * 7 + seed) % 251 for i in range(251))
    return (cycle * (size // 251 + 1))[:size]


def receiver(kind, size):
    if kind == "bytearray":
        return bytearray(size)
    if kind == "memoryview":
        return memoryview(bytearray(size))
    if kind == "array":
        return array.array("B", bytes(size))
    return numpy.zeros(size, dtype=numpy.uint8)


def source(kind, data):
    if kind == "bytes":
        return data
    if kind == "bytearray":
        return bytearray(data)
    if kind == "memoryview":
        return memoryview(bytearray(data))
    return numpy.frombuffer(data, dtype=numpy.uint8).copy()
"""

_BODY = (
    (
        _KINDS
        + """
with pmca.Session(mca=MCA, world=WORLD) as s:
    p, peer = s.p2p, 1 - RANK
    ps = s.pvar_session()
    counts = {name: ps.handle(f"btl_tcp_{name}", obj=peer)
              for name in ("native_bytes_received", "native_bytes_sent",
                           "streams_placed", "streams_staged")}
    cases = [(size, kind, SOURCES[n % len(SOURCES)])
             for n, (size, kind) in enumerate((s, k) for s in SIZES for k in RECEIVERS)]
    wrong = []
    for n, (size, kind, sent_as) in enumerate(cases):
        data = pattern(size, n)
        if RANK == 0:
            p.recv(1, n, bytearray(2), timeout=60)  # posted: it lands in place
            p.send(1, n, source(sent_as, data), timeout=60)
            continue
        into = receiver(kind, size)
        request = p.irecv(0, n, into)
        p.send(0, n, b"go", timeout=60)
        got = request.wait(60)
        if got != size or bytes(into) != data:
            wrong.append([size, kind, sent_as, got])
    refused = []
    for call in (lambda: p.recv(peer, 0, memoryview(bytearray(64))[::2], timeout=5),
                 lambda: p.send(peer, 0, memoryview(bytearray(64))[::2], timeout=5)):
        try:
            call()
        except ValueError as exc:
            refused.append(str(exc))
    bulk = [size for size, _kind, _sent in cases if size > PARSED_MOST]  # streamed or got
    streamed = [size for size in bulk if size <= EAGER_MOST]
    out(wrong=wrong, cases=len(cases), streamed=len(streamed), bulk_bytes=sum(bulk),
        python_at_most=sum(min(size, READ_AHEAD + PARSED_MOST) for size in bulk),
        refused=refused,
        **{name: handle.read() for name, handle in counts.items()})
"""
    )
    .replace("PARSED_MOST", str(STREAM_MIN - _MATCH))
    .replace("EAGER_MOST", str(DEFAULTS.eager_limit - _MATCH))
)


def test_large_bodies_land_in_every_buffer_kind_read_natively(tmp_path: Path) -> None:
    sizes = ",".join(str(size) for size in _SIZES)
    results = pair(tmp_path, _BODY, "self,tcp", sizes, str(_READ_AHEAD))
    for result in results:
        assert result["returncode"] == 0, result["stderr"]
    received = results[1]
    assert received["cases"] >= 3 * len(_SIZES)
    assert received["wrong"] == []
    # every streamed message went into its posted buffer, none through a buffer of its own
    assert (received["streams_placed"], received["streams_staged"]) == (received["streamed"], 0)
    # and every byte of it came by the native reader but what one read-ahead may stage and
    # a last rest under 64 KiB (cheaper read from Python); so did the rendezvous' get data
    native, bulk = received["native_bytes_received"], received["bulk_bytes"]
    assert bulk - received["python_at_most"] <= native <= bulk, received
    # what the sender wrote natively is part of those bodies (how much: the socket says)
    assert 0 <= results[0]["native_bytes_sent"] <= bulk, results[0]
    for result in results:
        assert len(result["refused"]) == 2, result
        assert all("not C-contiguous" in message for message in result["refused"]), result


class _Owner(_PlacingOwner):
    """Places every large message in ``target``, and records a lost connection."""

    def __init__(self, size: int) -> None:
        super().__init__(size)
        self.lost: list[BaseException] = []

    def connection_lost(self, connection: Any, failure: BaseException) -> None:
        self.lost.append(failure)


def _connected(owner: _Owner) -> tuple[socket.socket, Connection]:
    listener = socket.create_server(("127.0.0.1", 0))
    sender = socket.create_connection(listener.getsockname())
    receiver, _ = listener.accept()
    listener.close()
    connection = Connection(owner, 1, receiver, zerocopy=False)  # type: ignore[arg-type]
    connection.bulk_idle = 0.5  # a bound only: each read ends when the piece is in
    return sender, connection


def _receive_until(connection: Connection, done: Callable[[], bool], failure: str) -> None:
    deadline = time.monotonic() + 60
    while not done():
        assert time.monotonic() < deadline, failure
        connection.receive()


def test_a_body_written_in_pieces_is_read_natively_into_place() -> None:
    """The sender writes the body a piece at a time with pauses: it lands whole, and
    every byte after its header's read, but a last rest under 64 KiB, came through the
    native reader."""
    size = 3 << 20
    owner = _Owner(size)
    sender, connection = _connected(owner)
    body = bytes(range(256)) * (size // 256)
    head = wire.FRAME.pack(wire.AM, 7, size, 0)

    def write() -> None:
        sender.sendall(head + body[:100])
        for at in range(100, size, 1 << 19):
            time.sleep(0.01)
            sender.sendall(body[at : at + (1 << 19)])

    writer = threading.Thread(target=write, daemon=True)
    writer.start()
    try:
        _receive_until(connection, lambda: bool(owner.finished), "the body did not arrive")
        writer.join(30)
    finally:
        connection.close()
        sender.close()
    assert owner.finished == [None] and owner.lost == []
    assert owner.target == body
    assert size - _READ_AHEAD - STREAM_MIN <= connection.traffic[NATIVE_RECEIVED] <= size


def test_a_peer_closing_mid_body_loses_the_connection_saying_so() -> None:
    owner = _Owner(1 << 20)
    sender, connection = _connected(owner)
    sender.sendall(wire.FRAME.pack(wire.AM, 7, 1 << 20, 0) + bytes(200_000))
    sender.close()
    try:
        _receive_until(connection, lambda: bool(owner.lost), "the end went unseen")
    finally:
        connection.close()
    assert "closed the connection mid-transfer" in str(owner.lost[0])
    assert connection.traffic[NATIVE_RECEIVED] > 0
    assert owner.finished != [None]


def test_a_large_body_the_socket_cannot_take_at_once_is_written_natively() -> None:
    """A 4 MiB frame queued on a socket with small buffers and a slow reader: the
    rest of its body after the first write goes out by the native writer, from the
    queued buffer itself, and arrives byte for byte."""
    size = 4 << 20
    listener = socket.create_server(("127.0.0.1", 0))
    listener.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 64 << 10)
    writer_end = socket.create_connection(listener.getsockname())
    reader, _ = listener.accept()
    listener.close()
    writer_end.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, 64 << 10)
    connection = Connection(_Owner(0), 1, writer_end, zerocopy=False)  # type: ignore[arg-type]
    connection.bulk_idle = 0.5  # a bound only: each write ends when the reader stops
    body = bytearray(bytes(range(251)) * (size // 251 + 1))[:size]
    head = wire.FRAME.pack(wire.AM, 7, size, 0)
    got = bytearray()

    def read() -> None:
        while len(got) < len(head) + size:
            piece = reader.recv(1 << 16)
            if not piece:
                return
            got.extend(piece)
            time.sleep(0.0005)

    thread = threading.Thread(target=read, daemon=True)
    thread.start()
    done: list[BaseException | None] = []
    try:
        connection.push(Outgoing([memoryview(head), memoryview(body)], done.append))
        deadline = time.monotonic() + 60
        while connection.queue:
            assert time.monotonic() < deadline, "the body did not go out"
            connection.flush()
        thread.join(60)
    finally:
        connection.close()
        reader.close()
    assert done == [None]
    assert bytes(got) == head + body
    first = size + len(head) - connection.traffic[NATIVE_SENT]
    assert 0 < first < size // 2, first  # the first write took a part, the writer the rest
