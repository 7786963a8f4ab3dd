"""btl/tcp reads a large body into the receiver's buffer with its native reader.

Two real processes over loopback tcp: every buffer kind a blocking ``recv``
takes, from every kind of source buffer, at the sizes where the path
changes (the largest message parsed out of the connection's buffer, the
first one streamed into place, the largest eager one, the first rendezvous),
lands byte for byte, and the receiver's ``btl_tcp_bulk_bytes_native`` counts
at least every byte beyond one read-ahead of each streamed body: those were
read straight into the user's buffer by the native reader, not staged and
copied. A connection whose peer closes mid-body is lost with that said.
"""

from __future__ import annotations

import socket
import threading
import time
from pathlib import Path
from typing import Any

from pmca.btl import Placement
from pmca.btl.base._pvars import BULK_NATIVE
from pmca.btl.tcp import DEFAULTS
from pmca.btl.tcp import _wire as wire
from pmca.btl.tcp._connection import _READ_AHEAD, STREAM_MIN, Connection
from pmca.p2p import _protocol as proto

from ._pairs import pair

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
              for name in ("bulk_bytes_native", "streams_placed", "streams_staged")}
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
        staged_at_most=sum(min(size, READ_AHEAD) for size in bulk), refused=refused,
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
    # and every byte of it beyond what one read-ahead may stage came by the native reader
    # (and so did the rendezvous' get data)
    native, bulk = received["bulk_bytes_native"], received["bulk_bytes"]
    assert bulk - received["staged_at_most"] <= native <= bulk, received
    for result in results:
        assert len(result["refused"]) == 2, result
        assert all("not C-contiguous" in message for message in result["refused"]), result


class _Owner:
    """The module side a connection calls: places every large message in ``target``."""

    limits = DEFAULTS
    streams_placed = 0
    streams_staged = 0

    def __init__(self, size: int) -> None:
        self.target = bytearray(size)
        self.finished: list[BaseException | None] = []
        self.lost: list[BaseException] = []

    def place(self, connection: Any, tag: int, head: memoryview, length: int) -> Placement:
        return Placement(0, memoryview(self.target), self.finished.append)

    def connection_lost(self, connection: Any, failure: BaseException) -> None:
        self.lost.append(failure)

    def landed(self, connection: Any) -> None:
        """No flow control here."""


def _connected(owner: _Owner) -> tuple[socket.socket, Connection]:
    listener = socket.create_server(("127.0.0.1", 0))
    sender = socket.create_connection(listener.getsockname())
    receiver, _ = listener.accept()
    listener.close()
    connection = Connection(owner, 1, receiver, zerocopy=False)  # type: ignore[arg-type]
    connection.fill_idle = 0.5  # a bound only: each read ends when the piece is in
    return sender, connection


def test_a_body_written_in_pieces_is_read_natively_into_place() -> None:
    """The sender writes the body a piece at a time with pauses: it lands whole, and
    every byte after its header's read came through the native reader."""
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
        deadline = time.monotonic() + 60
        while not owner.finished:
            assert time.monotonic() < deadline, "the body did not arrive"
            connection.receive()
        writer.join(30)
    finally:
        connection.close()
        sender.close()
    assert owner.finished == [None] and owner.lost == []
    assert owner.target == body
    assert size - _READ_AHEAD <= connection.traffic[BULK_NATIVE] <= size


def test_a_peer_closing_mid_body_loses_the_connection_saying_so() -> None:
    owner = _Owner(1 << 20)
    sender, connection = _connected(owner)
    sender.sendall(wire.FRAME.pack(wire.AM, 7, 1 << 20, 0) + bytes(200_000))
    sender.close()
    try:
        deadline = time.monotonic() + 60
        while not owner.lost:
            assert time.monotonic() < deadline, "the end of the connection went unseen"
            connection.receive()
    finally:
        connection.close()
    assert "closed the connection mid-transfer" in str(owner.lost[0])
    assert connection.traffic[BULK_NATIVE] > 0
    assert owner.finished != [None]
