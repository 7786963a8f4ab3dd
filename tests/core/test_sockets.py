"""pmca._sockets.recv_exactly: the one exact read under the tcp hello, the pair world
and the stale-registration scenario."""

from __future__ import annotations

import socket
import threading

import pytest

from pmca._sockets import recv_exactly
from pmca.world import PairWorld, WorldError


def test_bytes_split_over_many_sends_are_read_whole() -> None:
    left, right = socket.socketpair()
    with left, right:

        def trickle() -> None:
            for byte in b"0123456789":
                left.sendall(bytes([byte]))

        writer = threading.Thread(target=trickle)
        writer.start()
        assert recv_exactly(right, 10, "a test") == b"0123456789"
        writer.join()
        assert recv_exactly(right, 0, "nothing") == b""


def test_a_peer_closing_early_is_named_with_what_was_read() -> None:
    left, right = socket.socketpair()
    with right:
        left.sendall(b"abc")
        left.close()
        with pytest.raises(
            ConnectionResetError,
            match=r"the peer closed the connection during the hello \(3 of 8 bytes read\)",
        ):
            recv_exactly(right, 8, "the hello")


def test_a_pair_world_whose_peer_leaves_mid_message_says_it_went_away() -> None:
    left, right = socket.socketpair()
    world = PairWorld(right, 0)

    def leave_mid_message() -> None:
        with left:
            recv_exactly(left, 8 + 4, "rank 0's part")
            left.sendall((100).to_bytes(8, "little") + b"only part")

    peer = threading.Thread(target=leave_mid_message)
    peer.start()
    with right, pytest.raises(WorldError, match=r"rank 1 went away .*9 of 100 bytes read"):
        world.allgather(b"mine", timeout=10)
    peer.join()
