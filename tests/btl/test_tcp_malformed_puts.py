"""A peer's put frames: a malformed one fails that peer, a refused one costs no memory.

This process's tcp module faces a pretend rank 1 (a socket of this test)
that writes put frames by hand. A put frame shorter than its own head used
to give a negative length, and the ``ValueError`` escaped ``progress()``; a
refused put (no live registration) used to be received into a buffer of its
whole declared size, up to 4 GiB, just to be dropped.
"""

from __future__ import annotations

import socket
import tracemalloc
from contextlib import suppress

from pmca.btl import PeerFailed
from pmca.btl.tcp import _wire as wire

from ._tcp_peer import connected_peers, progress_until

MCA = {"btl": "self,tcp", "btl_tcp_if_include": "127.0.0.1/8", "pmca_base_modex_timeout": 60}
#: A refused put's data: far more than a scratch piece, sent in pieces of PIECE.
REFUSED = 64 << 20
PIECE = 256 << 10


def test_a_put_frame_shorter_than_its_head_fails_that_peer(pmca_env) -> None:
    with connected_peers(MCA, peers=1) as (tcp, _endpoints, (rank1,)):
        # 8 bytes said, then more: a reader trusting the frame fills its head anyway
        rank1.sendall(wire.FRAME.pack(wire.PUT, 0, 8, 0) + bytes(64))
        progress_until(tcp, lambda: tcp.lost)  # raised ValueError before
        assert tcp.lost == [1], "the malformed put frame was not noticed"
        (error,) = tcp.errors
        assert isinstance(error, PeerFailed) and error.rank == 1, repr(error)
        assert "rank 1" in str(error) and "malformed put frame" in str(error), str(error)


def _refusal(rank1: socket.socket, tcp: object) -> bytes:
    """The first frame ``rank1`` gets back, whole (header and body)."""
    received = b""
    rank1.settimeout(0.01)

    def whole() -> bool:
        nonlocal received
        with suppress(TimeoutError):
            received += rank1.recv(4096)
        if len(received) < wire.FRAME.size:
            return False
        length = wire.FRAME.unpack_from(received)[2]
        return len(received) >= wire.FRAME.size + length

    progress_until(tcp, whole)
    return received


def test_a_refused_put_is_dropped_piece_by_piece(pmca_env) -> None:
    with connected_peers(MCA, peers=1) as (tcp, _endpoints, (rank1,)):
        head = wire.PUT_HEAD.pack(12345, 0x1000, 77)  # no such registration: refused
        rank1.sendall(wire.FRAME.pack(wire.PUT, 0, len(head) + REFUSED, 0) + head)
        data = memoryview(b"\xab" * PIECE)
        rank1.setblocking(False)
        tracemalloc.start()
        try:
            sent = 0
            while sent < REFUSED:
                with suppress(BlockingIOError):
                    sent += rank1.send(data[: min(PIECE, REFUSED - sent)])
                tcp.progress()
            _size, peak = tracemalloc.get_traced_memory()
        finally:
            tracemalloc.stop()
        # the whole declared size was allocated before, to be thrown away
        assert peak < REFUSED // 8, f"{peak} bytes allocated to drop a refused put"
        reply = _refusal(rank1, tcp)
        kind, _tag, length, request = wire.FRAME.unpack_from(reply)
        assert (kind, request) == (wire.PUT_ERROR, 77), (kind, request)
        message = reply[wire.FRAME.size : wire.FRAME.size + length].decode()
        assert "no live registration 12345" in message, message
        assert tcp.lost == [], f"a refused put failed its peer: {tcp.errors}"
