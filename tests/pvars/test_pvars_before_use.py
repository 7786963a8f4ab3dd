"""A pvar ``pmca info --pvars`` lists has a handle in any session, and an unstarted read says so."""

from __future__ import annotations

import json
import subprocess
import sys
import warnings

import pmca
import pmca.mca

#: In a fresh process (nothing of the message layer or of the btls imported
#: yet), a session without any framework open: a handle on every pvar listed.
_HANDLES_IN_A_BARE_SESSION = """
import json, sys
import pmca
import pmca.mca

names = json.loads(sys.argv[1])
with pmca.Session(frameworks=[]) as s:
    ps = s.pvar_session()
    refused = {}
    for name in names:
        try:
            ps.handle(name).read()
        except pmca.mca.PVarError as exc:
            refused[name] = str(exc)
print(json.dumps(refused))
"""


def _child(*args: str) -> str:
    done = subprocess.run(
        [sys.executable, *args], capture_output=True, text=True, timeout=120, check=False
    )
    assert done.returncode == 0, done.stderr
    return done.stdout


def test_every_listed_pvar_has_a_handle_in_a_bare_session(pmca_env) -> None:
    listing = json.loads(_child("-m", "pmca", "info", "--pvars", "--json"))
    pvars = {p["name"]: p["binding"] for p in listing["pvars"]}
    assert "p2p_base_unexpected_queue" in pvars and "btl_tcp_bytes_sent" in pvars
    refused = json.loads(_child("-c", _HANDLES_IN_A_BARE_SESSION, json.dumps(sorted(pvars))))
    # A pvar bound per peer needs a peer: no handle without one, and the
    # error says so (rather than that no such pvar exists).
    for name, why in refused.items():
        assert why == (f"pvar {name!r} is bound per {pvars[name]}: None is not one of []"), name
    assert sorted(refused) == sorted(n for n, b in pvars.items() if b != "none")
    assert "p2p_base_unexpected_queue" not in refused


def test_reading_a_handle_never_started_says_so_once(pmca_env) -> None:
    with pmca.Session(frameworks=[]) as s:
        ps = s.pvar_session()
        timer = ps.handle("p2p_base_matching_time")
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            assert timer.read() == 0
            assert timer.read() == 0
        assert [str(w.message) for w in caught] == [
            "pvar 'p2p_base_matching_time' (timer) is read from a handle that was never "
            "started: it counts only between start() and stop(), so it reads 0; call "
            "start() first"
        ]
        assert caught[0].category is pmca.mca.PVarWarning
        assert caught[0].filename == __file__, "attributed to the reader's line"
        timer.start()
        timer.stop()
        ps.handle("p2p_base_matching_time")  # a second one, never started: read by the sweep
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            ps.read_all()
        assert [(w.category, w.filename) for w in caught] == [(pmca.mca.PVarWarning, __file__)]
        continuous = ps.handle("p2p_base_unexpected_messages")
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            timer.read()  # started once: its stopped value is what it counted
            continuous.read()  # always started
        assert caught == []
