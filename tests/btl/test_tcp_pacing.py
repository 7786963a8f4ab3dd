"""btl/tcp's send pacing: how a queued message is cut into system calls (the real flush loop)."""

from __future__ import annotations

import select
import socket
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from pmca.btl.tcp._connection import Connection
from pmca.btl.tcp._records import Outgoing
from pmca.btl.tcp._writes import _IOV_MAX, _first_bytes


class _Noted:
    """A real socket whose ``send``/``sendmsg`` calls are noted: bytes offered, bytes taken."""

    def __init__(self, sock: socket.socket) -> None:
        self._sock = sock
        self.calls: list[tuple[int, int]] = []

    def send(self, data: memoryview, flags: int = 0) -> int:
        sent = self._sock.send(data, flags)
        self.calls.append((memoryview(data).nbytes, sent))
        return sent

    def sendmsg(self, buffers: list[memoryview], ancillary: Any, flags: int = 0) -> int:
        sent = self._sock.sendmsg(buffers, ancillary, flags)
        self.calls.append((sum(b.nbytes for b in buffers), sent))
        return sent

    def __getattr__(self, name: str) -> Any:
        return getattr(self._sock, name)


def _flushed(sizes: list[int], limit: int) -> tuple[list[tuple[int, int]], bytes, bytes, list]:
    """Send buffers of ``sizes`` through a real Connection's flush over loopback TCP.

    The sender's buffer is small, so the socket takes part of a piece now and
    then: flush's own bookkeeping of partial sends is what rebuilds the message.
    """
    original = bytes(i % 251 for i in range(sum(sizes)))
    views, offset = [], 0
    for size in sizes:
        views.append(memoryview(original)[offset : offset + size])
        offset += size
    listener = socket.create_server(("127.0.0.1", 0))
    sender = socket.create_connection(listener.getsockname())
    receiver, _ = listener.accept()
    listener.close()
    sender.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, 4096)
    receiver.setblocking(False)
    noted = _Noted(sender)
    connection = Connection(None, 1, noted, zerocopy=False, bulk_chunk=limit)  # type: ignore[arg-type]
    done: list[Any] = []
    received = bytearray()
    try:
        connection.push(Outgoing(buffers=views, callback=done.append))
        while connection.queue or len(received) < len(original):
            connection.flush()
            try:
                received += receiver.recv(1 << 16)
            except BlockingIOError:
                select.select([receiver], [], [], 0.01)
    finally:
        connection.close()
        receiver.close()
    return noted.calls, bytes(received), original, done


@settings(max_examples=40, deadline=None)
@given(
    st.lists(st.integers(min_value=0, max_value=20000), min_size=1, max_size=8),
    st.integers(min_value=1, max_value=6000),
)
def test_flush_rebuilds_the_message_in_pieces_within_the_limit(
    sizes: list[int], limit: int
) -> None:
    calls, received, original, done = _flushed(sizes, limit)
    assert received == original
    assert done == [None]
    # What flush offered each system call: never more than the limit and its slack.
    assert all(offered <= limit + (limit >> 2) for offered, _ in calls), calls
    # A piece offered whole after a whole one before it is a full chunk, but the last.
    whole = [offered for offered, sent in calls if offered == sent]
    assert all(offered >= limit for offered in whole[:-1] if offered), calls


def test_no_limit_sends_everything_up_to_the_iovec_maximum() -> None:
    views = [memoryview(b"x")] * (_IOV_MAX + 3)
    assert len(_first_bytes(views, 0)) == _IOV_MAX


def test_a_short_tail_goes_with_the_last_chunk() -> None:
    header, body = memoryview(bytes(16)), memoryview(bytes(1000 + 100))
    assert [v.nbytes for v in _first_bytes([header, body], 1000)] == [16, 1100]
    assert [v.nbytes for v in _first_bytes([header, body], 800)] == [16, 784]
