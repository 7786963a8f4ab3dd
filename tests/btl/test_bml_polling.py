"""Which modules a wait polls: only those some rank is reached through."""

from __future__ import annotations

from pathlib import Path

from ._pairs import pair

_POLLED = """
with pmca.Session(mca=MCA, frameworks=["btl"], world=WORLD) as s:
    bml = s._data_path().bml
    routed = {id(route.module) for peer in bml.peers for route in peer.routes}
    peer = 1 - RANK
    if RANK == 0:
        s.p2p.send(peer, 1, b"ping")
        got = bytearray(4)
        s.p2p.recv(peer, 2, got, timeout=60)
    else:
        got = bytearray(4)
        s.p2p.recv(peer, 1, got, timeout=60)
        s.p2p.send(peer, 2, b"pong")
    out(
        got=bytes(got).decode(),
        modules=len(bml.modules),
        routed=[i for i, m in enumerate(bml.modules) if id(m) in routed],
        polled=[i for i, m in enumerate(bml.modules) if any(m is p for p in bml._polled)],
    )
"""


def test_modules_reaching_no_rank_are_not_polled(pmca_env, tmp_path: Path) -> None:
    """Every tcp rail opens a module, but two ranks of one host meet over loopback
    only: the rails no rank is reached through stay out of the wait's polling,
    while the routed ones still carry the messages."""
    for result in pair(tmp_path, _POLLED, "self,tcp"):
        assert result["returncode"] == 0, result
        assert result["got"] == ("pong" if result["rank"] == 0 else "ping"), result
        assert result["routed"], result
        assert result["polled"] == result["routed"], result


def test_a_library_that_cannot_be_loaded_leaves_waits_polling_from_python(
    tmp_path, monkeypatch
) -> None:
    """A file where the library should be that dlopen refuses (a broken build, a
    truncated copy) gives no spinner: waits poll from Python instead of failing."""
    from pmca.btl.bml import _spin

    broken = tmp_path / _spin.LIBRARY_NAME
    broken.write_bytes(b"\x7fELF truncated")
    monkeypatch.setattr(_spin, "library_path", lambda: str(broken))
    monkeypatch.setattr(_spin, "_loaded", [])
    assert _spin.spinner() is None
