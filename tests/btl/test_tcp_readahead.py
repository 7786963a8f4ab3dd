"""btl/tcp's receive loop (a real Connection over loopback TCP): a large body that is
already waiting behind its header is read into its destination, not through the
connection's own buffer and copied a second time; frames already read are parsed
without waiting for more input."""

from __future__ import annotations

import fcntl
import socket
import struct
import termios
import threading
import time
from typing import Any

import pytest

from pmca.btl import Placement
from pmca.btl.tcp import DEFAULTS
from pmca.btl.tcp import _wire as wire
from pmca.btl.tcp._connection import _READ_AHEAD, STREAM_MIN, Connection
from pmca.btl.tcp._polling import Polling

_BODY = 0xAB
_SIZE = 1 << 20


class _Owner:
    """The module side a connection calls: places every large message in ``target``."""

    limits = DEFAULTS
    streams_placed = 0
    streams_staged = 0

    def __init__(self, size: int) -> None:
        self.target = bytearray(size)
        self.finished: list[BaseException | None] = []
        self.small: list[bytes] = []

    def place(self, connection: Any, tag: int, head: memoryview, length: int) -> Placement:
        return Placement(0, memoryview(self.target), self.finished.append)

    def dispatch(self, connection: Any, kind: int, tag: int, aux: int, body: memoryview) -> None:
        self.small.append(bytes(body))

    def connection_lost(self, connection: Any, failure: BaseException) -> None:
        raise AssertionError(f"connection lost: {failure}")

    def landed(self, connection: Any) -> None:
        """No flow control here (nothing holds what arrives)."""


def _waiting(sock: socket.socket) -> int:
    """Bytes in ``sock``'s receive queue (SIOCINQ)."""
    raw = fcntl.ioctl(sock.fileno(), termios.FIONREAD, struct.pack("i", 0))
    return int(struct.unpack("i", raw)[0])


def test_a_large_body_waiting_behind_its_header_lands_in_place() -> None:
    listener = socket.create_server(("127.0.0.1", 0))
    listener.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4 << 20)
    sender = socket.create_connection(listener.getsockname())
    receiver, _ = listener.accept()
    listener.close()
    owner = _Owner(_SIZE)
    connection = Connection(owner, 1, receiver, zerocopy=False)  # type: ignore[arg-type]
    stream = b"".join(
        (
            wire.FRAME.pack(wire.AM, 7, _SIZE, 0),
            bytes([_BODY]) * _SIZE,
            wire.FRAME.pack(wire.AM, 7, 5, 0),
            b"after",
        )
    )
    writer = threading.Thread(target=sender.sendall, args=(stream,), daemon=True)
    writer.start()
    try:
        # Far more than one read-ahead waits before the connection reads at all.
        deadline = time.monotonic() + 30
        while _waiting(receiver) < 4 * _READ_AHEAD and writer.is_alive():
            assert time.monotonic() < deadline, f"only {_waiting(receiver)} bytes arrived"
            time.sleep(0.001)
        while not (owner.finished and owner.small):
            assert time.monotonic() < deadline, "the message did not arrive"
            connection.receive()
        writer.join(30)
    finally:
        connection.close()
        sender.close()
    assert owner.finished == [None]
    assert owner.target == bytes([_BODY]) * _SIZE
    assert owner.small == [b"after"]
    # The connection's own buffer held no more of the body than one read-ahead.
    staged = bytes(connection.buffer).count(_BODY)
    assert 0 < staged <= _READ_AHEAD, staged


def test_the_read_ahead_holds_a_whole_parsed_frame() -> None:
    # A frame parsed out of the buffer (body up to STREAM_MIN) fits one read.
    assert wire.FRAME.size + STREAM_MIN <= _READ_AHEAD


def test_a_read_that_fills_the_read_ahead_reads_again() -> None:
    """Small frames waiting beyond one read-ahead are all handled by one receive: a
    read that took all it asked for did not empty the socket, so it reads again."""
    listener = socket.create_server(("127.0.0.1", 0))
    listener.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4 << 20)
    sender = socket.create_connection(listener.getsockname())
    receiver, _ = listener.accept()
    listener.close()
    owner = _Owner(0)
    connection = Connection(owner, 1, receiver, zerocopy=False)  # type: ignore[arg-type]
    body = bytes(1000)
    frames = 4 * _READ_AHEAD // (wire.FRAME.size + len(body))
    stream = b"".join(wire.FRAME.pack(wire.AM, 7, len(body), 0) + body for _ in range(frames))
    writer = threading.Thread(target=sender.sendall, args=(stream,), daemon=True)
    writer.start()
    try:
        deadline = time.monotonic() + 30
        while _waiting(receiver) < len(stream):
            assert time.monotonic() < deadline, f"only {_waiting(receiver)} bytes arrived"
            time.sleep(0.001)
        handled = connection.receive()
        writer.join(30)
    finally:
        connection.close()
        sender.close()
    assert handled == frames
    assert owner.small == [body] * frames


class _FirstDispatchFails(_Owner):
    def dispatch(self, connection: Any, kind: int, tag: int, aux: int, body: memoryview) -> None:
        if not self.small:
            self.small.append(b"")
            raise RuntimeError("the first handler fails")
        super().dispatch(connection, kind, tag, aux, body)


def test_frames_behind_one_whose_handler_raised_are_parsed_with_no_new_input() -> None:
    """Two frames read at once, the first one's handler raising: the second waits in
    the buffer with nothing more to come on the socket. The rail's next progress
    handles it, and a wait does not sleep on the socket meanwhile."""
    listener = socket.create_server(("127.0.0.1", 0))
    sender = socket.create_connection(listener.getsockname())
    receiver, _ = listener.accept()
    listener.close()
    owner = _FirstDispatchFails(0)
    connection = Connection(owner, 1, receiver, zerocopy=False)  # type: ignore[arg-type]
    polling = Polling(None)
    polling.add(connection)
    stream = b"".join(wire.FRAME.pack(wire.AM, 7, 5, 0) + body for body in (b"first", b"after"))
    sender.sendall(stream)
    try:
        deadline = time.monotonic() + 30
        while _waiting(receiver) < len(stream):
            assert time.monotonic() < deadline, f"only {_waiting(receiver)} bytes arrived"
            time.sleep(0.001)
        with pytest.raises(RuntimeError, match="first handler"):
            polling.progress()
        assert _waiting(receiver) == 0
        assert polling.wait_fds(None) is None  # not asleep on a socket with nothing to say
        assert polling.progress() == 1
        assert owner.small == [b"", b"after"]
        assert polling.wait_fds(None) == [receiver.fileno()]
    finally:
        connection.close()
        sender.close()
