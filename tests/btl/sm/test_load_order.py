"""The sm tests after a dso close of btl/sm: an order pytest does not run by default.

pytest runs tests/btl/sm/ before the btl tests beside it. Run the other way
round in dso mode, a session's close has taken ``pmca.btl.sm`` out of
``sys.modules`` before the transport tests pickle its objects for their
peers, so classes imported while collecting are no longer the ones pickle
finds by name.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pmca

ROOT = Path(__file__).resolve().parents[3]
HERE = Path(__file__).resolve().relative_to(ROOT)
TRANSPORT = HERE.with_name("test_transport.py")


def test_a_session_close_unloads_btl_sm_only_in_dso_mode(pmca_env, pmca_load_mode) -> None:
    import pmca.btl.sm._transport as imported_before

    with pmca.Session(mca={"btl": "self,sm"}, frameworks=["btl"]) as s:
        assert [m.name for m in s.modules("btl")] == ["self", "sm"]
    left = sys.modules.get("pmca.btl.sm._transport")
    if pmca_load_mode == "dso":
        assert left is None, "a dso close left pmca.btl.sm in sys.modules"
    else:
        assert left is imported_before


def test_transport_tests_pass_after_a_dso_close_of_btl_sm(pmca_env) -> None:
    # These three pickle a SegmentAddress for a peer, build one, and expect
    # TransportError: each failed in this order while the tests kept classes
    # imported at collection.
    nodes = [
        f"{HERE}::test_a_session_close_unloads_btl_sm_only_in_dso_mode",
        f"{TRANSPORT}::test_every_fragment_size_round_trips_with_its_checksum",
        f"{TRANSPORT}::test_attach_rejects_what_is_not_a_segment_of_that_peer",
        f"{TRANSPORT}::test_close_unmaps_segments_and_closes_descriptors",
    ]
    command = [sys.executable, "-m", "pytest", "--pmca-load-mode=dso", "-p", "no:randomly"]
    result = subprocess.run(
        [*command, "-p", "no:cacheprovider", "-q", *nodes],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
    )
    report = result.stdout[-6000:] + result.stderr[-2000:]
    assert result.returncode == 0, report
    assert f"{len(nodes)} passed" in result.stdout, report
