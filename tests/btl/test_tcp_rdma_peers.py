"""btl/tcp's gets belong to the peer they were asked of: another peer's loss
fails none of them, and another peer cannot answer them.

This process's tcp module faces two pretend ranks (sockets of this test);
rank 1 is asked for data with ``get``, rank 2 plays the bystander.
"""

from __future__ import annotations

import socket
import time
from contextlib import suppress
from typing import Any

from pmca.btl import PeerFailed
from pmca.btl.tcp import _wire as wire

from ._tcp_peer import connected_peers, progress_until

MCA = {
    "btl": "self,tcp",
    "btl_tcp_if_include": "127.0.0.1/8",
    "pmca_base_modex_timeout": 60,
}
SIZE = 256 << 10


def _two_peers() -> Any:
    """This process's tcp module, its endpoints for pretend ranks 1 and 2, their sockets."""
    return connected_peers(MCA, peers=2)


def _get_request(tcp: Any, peer: socket.socket) -> int:
    """The id of the GET request ``peer`` reads while ``tcp`` progresses."""
    received = b""
    peer.settimeout(0.05)
    deadline = time.monotonic() + 30
    wanted = wire.FRAME.size + wire.GET_REQUEST.size
    while len(received) < wanted and time.monotonic() < deadline:
        tcp.progress()
        with suppress(TimeoutError):
            received += peer.recv(wanted - len(received))
    kind, _tag, _length, request = wire.FRAME.unpack_from(received)
    assert kind == wire.GET_REQ, kind
    return int(request)


def _data(request: int, body: bytes) -> bytes:
    return wire.FRAME.pack(wire.GET_DATA, 0, len(body), request) + body


def _ask_rank_1(tcp: Any, endpoint: Any, ends: list[BaseException | None]) -> bytearray:
    target = bytearray(SIZE)
    handle = wire.HANDLE.pack(b"\0" * 8, 7, 0x1000, SIZE)
    tcp.get(endpoint, memoryview(target), None, 0x1000, handle, ends.append)
    return target


def test_losing_one_peer_fails_no_get_from_another(pmca_env) -> None:
    """Rank 2's connection ends while a get from rank 1 waits: the get goes on, and
    completes with rank 1's bytes (the loss failed every get in flight)."""
    with _two_peers() as (tcp, endpoints, (rank1, rank2)):
        ends: list[BaseException | None] = []
        target = _ask_rank_1(tcp, endpoints[0], ends)
        request = _get_request(tcp, rank1)
        rank2.close()
        progress_until(tcp, lambda: tcp.lost)
        assert tcp.lost == [2], "rank 2's closed connection was never noticed"
        assert ends == [], f"rank 2's loss ended rank 1's get: {ends}"
        payload = bytes(range(256)) * (SIZE // 256)
        rank1.sendall(_data(request, payload))
        progress_until(tcp, lambda: bool(ends))
        assert ends == [None] and bytes(target) == payload


def test_a_peer_cannot_answer_another_peers_get(pmca_env) -> None:
    """Rank 2 sends data for the get asked of rank 1: rank 2's connection is dropped
    as faulty, and the get still takes rank 1's bytes only."""
    with _two_peers() as (tcp, endpoints, (rank1, rank2)):
        ends: list[BaseException | None] = []
        target = _ask_rank_1(tcp, endpoints[0], ends)
        request = _get_request(tcp, rank1)
        rank2.sendall(_data(request, b"\xff" * SIZE))
        progress_until(tcp, lambda: tcp.lost or ends)
        assert ends == [], f"rank 2 answered rank 1's get: {ends}"
        assert tcp.lost == [2], "rank 2's forged answer was taken"
        assert bytes(target) == bytes(SIZE)
        payload = bytes(range(256)) * (SIZE // 256)
        rank1.sendall(_data(request, payload))
        progress_until(tcp, lambda: bool(ends))
        assert ends == [None] and bytes(target) == payload


def test_a_get_refused_for_a_lost_peer_keeps_no_hold_on_the_buffer(pmca_env) -> None:
    """A get asked of a peer whose connection was lost raises PeerFailed at once and
    keeps nothing of it in flight: the caller's buffer can be resized afterwards
    (a view of it was kept until finalize)."""
    with _two_peers() as (tcp, endpoints, (_rank1, rank2)):
        rank2.close()
        progress_until(tcp, lambda: tcp.lost)
        assert tcp.lost == [2]
        target = bytearray(SIZE)
        ends: list[BaseException | None] = []
        handle = wire.HANDLE.pack(b"\0" * 8, 7, 0x1000, SIZE)
        try:
            tcp.get(endpoints[1], memoryview(target), None, 0x1000, handle, ends.append)
        except PeerFailed:
            pass
        else:
            raise AssertionError("a get asked of a lost peer was accepted")
        target.extend(b"more")  # BufferError while a view of it is still kept
        assert ends == []
