"""The modex: one blob per rank, malformed and foreign entries rejected naming the rank."""

from __future__ import annotations

import pytest

import pmca
from pmca.btl import ModexError
from pmca.btl.base import _modex
from pmca.btl.tcp import _wire
from pmca.runtime import RUNTIME


class TwoRankWorld:
    """Rank 0 of a world whose rank 1 published ``peer_blob`` (a real world, fixed data)."""

    rank = 0
    size = 2
    description = "test world"

    def __init__(self, peer_blob: bytes) -> None:
        self.peer_blob = peer_blob

    def allgather(self, data: bytes, *, timeout: float | None = None) -> list[bytes]:
        return [data, self.peer_blob]

    def barrier(self, *, timeout: float | None = None) -> None:
        return None


def test_round_trip() -> None:
    blob = _modex.pack({"tcp": b"abc", "self": b""}, pid=42, host="h/1")
    entry = _modex.unpack(3, blob)
    assert entry.rank == 3 and entry.pid == 42 and entry.host == "h/1"
    assert entry.addresses == {"tcp": b"abc", "self": b""}


@pytest.mark.parametrize(
    ("blob", "message"),
    [
        (b"", "too short"),
        (b"GARBAGE-GARBAGE-GARBAGE", "not a pmca modex"),
        (_modex.pack({}, pid=1, host="h").replace(b"\x01\x00", b"\x09\x00", 1), "version 9"),
        (_modex.pack({"tcp": b"x" * 10}, pid=1, host="h")[:-3], "truncated"),
        (_modex.pack({}, pid=1, host="h") + b"extra", "trailing"),
    ],
)
def test_malformed_entries_name_the_rank(blob: bytes, message: str) -> None:
    with pytest.raises(ModexError, match=f"rank 5.*{message}"):
        _modex.unpack(5, blob)


def test_foreign_tcp_address_is_rejected() -> None:
    with pytest.raises(ModexError, match="rank 2 is not a pmca tcp address"):
        _wire.unpack_address(2, b"HTTP/1.1 200 OK")
    listening = (_wire.Listening("127.0.0.1", 8, 1234), _wire.Listening("fd00::1", 64, 99))
    good = _wire.pack_address(_wire.TcpAddress(b"n" * 8, listening))
    assert _wire.unpack_address(0, good) == _wire.TcpAddress(b"n" * 8, listening)
    with pytest.raises(ModexError, match="malformed"):
        _wire.unpack_address(1, good[:-2])


@pytest.mark.parametrize(
    ("peer_blob", "message"),
    [
        (b"not a modex at all", "modex entry of rank 1: not a pmca modex"),
        (
            _modex.pack({"tcp": b"TCPX" + bytes(20)}, pid=1, host="elsewhere"),
            "modex address of rank 1 is not a pmca tcp address",
        ),
    ],
)
def test_session_init_rejects_a_bad_peer_entry_cleanly(pmca_env, peer_blob, message) -> None:
    session = pmca.Session(mca={"btl": "self,tcp"}, world=TwoRankWorld(peer_blob))
    with pytest.raises(ModexError, match=message):
        session.init()
    assert RUNTIME.sessions == 0 and not RUNTIME.frameworks
    # and the process can start over
    with pmca.Session(mca={"btl": "self"}) as again:
        assert again.reach(0) == ["self"]
