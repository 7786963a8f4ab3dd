"""btl/tcp's eager path against a raw socket peer: frames whole and in order however
the bytes move, with exact counters."""

from __future__ import annotations

import itertools
import socket
import time
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from typing import Any

import pmca
from pmca.btl import TAG_USER
from pmca.btl.base._pvars import BYTES_RECEIVED, BYTES_SENT, MESSAGES_RECEIVED, MESSAGES_SENT
from pmca.btl.tcp import _wire as wire

from ._tcp_peer import hello_from, pretend_peer

MCA = {
    "btl": "self,tcp",
    "btl_tcp_if_include": "127.0.0.1/8",
    "pmca_base_modex_timeout": 60,
}


@contextmanager
def _paired() -> Iterator[tuple[Any, Any, socket.socket]]:
    """This process's tcp module, its endpoint for a pretend rank 1, and rank 1's socket."""
    with pmca.Session(mca=MCA, frameworks=["btl"]) as s:
        tcp, procs, nonce = pretend_peer(s)
        peer = hello_from("127.0.0.1", tcp.port, nonce)
        endpoint = tcp.add_procs(procs)[1]
        assert endpoint is not None
        try:
            yield tcp, endpoint, peer
        finally:
            tcp.del_procs([endpoint])
            peer.close()


def _message(index: int, size: int) -> bytes:
    return index.to_bytes(4, "little") * (size // 4)


def _read(tcp: Any, peer: socket.socket, expected: int) -> bytes:
    """What ``peer`` reads while ``tcp`` progresses, until ``expected`` bytes (or 60 s)."""
    received = bytearray()
    peer.settimeout(0.05)
    deadline = time.monotonic() + 60
    while len(received) < expected and time.monotonic() < deadline:
        tcp.progress()
        with suppress(TimeoutError):
            received += peer.recv(1 << 20)
    return bytes(received)


def _frames(data: bytes) -> list[tuple[int, int, bytes]]:
    frames, at = [], 0
    while at < len(data):
        kind, tag, length, _aux = wire.FRAME.unpack_from(data, at)
        at += wire.FRAME.size
        frames.append((kind, tag, data[at : at + length]))
        at += length
    assert at == len(data), "a frame was cut short"
    return frames


def test_eager_frames_that_fill_a_stalled_socket_arrive_whole_and_in_order(pmca_env) -> None:
    """4 KiB sendi's to a peer that reads nothing: the socket fills mid-frame (the rest
    of that frame is copied and queued), later ones queue or are refused; once the
    peer reads, exactly the accepted messages arrive, whole, in order, counted."""
    size = 4096
    with _paired() as (tcp, endpoint, peer):
        accepted = 0
        while accepted < 20_000 and tcp.sendi(endpoint, TAG_USER, [_message(accepted, size)]):
            accepted += 1
        connection = tcp.connections()[1]
        assert connection.queue, "the socket never filled: nothing was left to queue"
        frames = _frames(_read(tcp, peer, accepted * (wire.FRAME.size + size)))
        assert [(kind, tag) for kind, tag, _ in frames] == [(wire.AM, TAG_USER)] * accepted
        for index, (_kind, _tag, body) in enumerate(frames):
            assert body == _message(index, size), f"message {index} changed on the way"
        assert not connection.queue and connection.owned == 0
        counts = tcp.peer_traffic(1)
        assert (counts[MESSAGES_SENT], counts[BYTES_SENT]) == (accepted, accepted * size)


def test_frames_in_any_pieces_are_received_whole_and_counted(pmca_env) -> None:
    """Frames written whole, several in one write, and cut at every byte: each is
    handed over once, whole, in order; a read that leaves a frame unfinished waits
    for the rest (the next poll), not for a read that would block."""
    sizes = [8, 4096, 16, 8192, 1, 0, 16384, 24]
    stream = b"".join(
        wire.FRAME.pack(wire.AM, TAG_USER, size, 0) + _message(i, size + 3)[:size]
        for i, size in enumerate(sizes)
    )
    with _paired() as (tcp, _endpoint, peer):
        got: list[bytes] = []
        tcp.register_recv(TAG_USER, lambda _e, _t, data: got.append(bytes(data)))

        def deliver(pieces: list[bytes]) -> None:
            got.clear()
            for piece in pieces:
                peer.sendall(piece)
                tcp.progress()
            deadline = time.monotonic() + 30
            while len(got) < len(sizes) and time.monotonic() < deadline:
                tcp.progress()
            assert got == [_message(i, size + 3)[:size] for i, size in enumerate(sizes)]

        deliver([stream])  # all in one write
        cuts = [*range(0, len(stream), 997), len(stream)]
        deliver([stream[a:b] for a, b in itertools.pairwise(cuts)])
        head = stream[:100]
        deliver([head[i : i + 1] for i in range(len(head))] + [stream[100:]])  # byte by byte
        counts = tcp.peer_traffic(1)
        assert counts[MESSAGES_RECEIVED] == 3 * len(sizes)
        assert counts[BYTES_RECEIVED] == 3 * sum(sizes)


def test_an_eager_message_of_more_parts_than_one_write_takes_arrives_whole(pmca_env) -> None:
    """A sendi of more parts than one sendmsg may carry (the kernel's iovec limit is
    1024) is written in several, not refused by the kernel as a lost connection."""
    parts = [i.to_bytes(2, "little") for i in range(1500)]
    with _paired() as (tcp, endpoint, peer):
        assert tcp.sendi(endpoint, TAG_USER, parts)
        received = _read(tcp, peer, wire.FRAME.size + 2 * len(parts))
        assert tcp.connections()[1].closed is None
        assert _frames(received) == [(wire.AM, TAG_USER, b"".join(parts))]
