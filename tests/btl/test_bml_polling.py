"""Which modules a wait polls (only those some rank is reached through), and how it reads."""

from __future__ import annotations

from pathlib import Path

import pytest

from pmca.btl.bml._spin import spinner

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


_READS_WHAT_THE_SPIN_FOUND = """
class Counting:
    # A rail's poll object, counting the polls its progress asks the kernel for.
    def __init__(self, polled):
        self.polled, self.calls = polled, 0

    def poll(self, timeout=None):
        self.calls += 1
        return self.polled.poll(timeout)

    def __getattr__(self, name):
        return getattr(self.polled, name)


ROUNDS = 200
MCA["btl_base_wait_spin"] = 60  # every wait spins (polls natively) until its message is in
with pmca.Session(mca=MCA, frameworks=["btl"], world=WORLD) as s:
    bml = s._data_path().bml
    rails = [m for m in bml._polled if m.name == "tcp"]
    counters = []
    for rail in rails:
        counters.append(Counting(rail._polling._poll))
        rail._polling._poll = counters[-1]
    peer, buffer = 1 - RANK, bytearray(4096)
    for i in range(ROUNDS):
        if RANK == 0:
            s.p2p.send(peer, 1, i.to_bytes(4, "little") * 1024)
            s.p2p.recv(peer, 2, buffer, timeout=60)
        else:
            s.p2p.recv(peer, 1, buffer, timeout=60)
            s.p2p.send(peer, 2, buffer)
        assert bytes(buffer) == i.to_bytes(4, "little") * 1024, i
    out(polls=sum(c.calls for c in counters), rails=len(rails), rounds=ROUNDS)
"""


@pytest.mark.skipif(spinner() is None, reason="libpmca_bml_spin.so is not built")
def test_a_spinning_wait_reads_what_its_native_poll_found_without_polling_again(
    pmca_env, tmp_path: Path
) -> None:
    """A blocking receive over tcp whose wait polls natively (see test_wait_releases_gil)
    reads the socket that poll found readable: the rail's own poll from Python is not
    asked again, once per message before. 200 ping-pongs of 4 KiB arrive intact."""
    for result in pair(tmp_path, _READS_WHAT_THE_SPIN_FOUND, "self,tcp"):
        assert result["returncode"] == 0, result
        assert result["rails"] >= 1, result
        # Old code polled from Python at least twice per receive (400 here).
        assert result["polls"] < result["rounds"] // 10, result
