"""Finalize moves data within its own bound, and leaving is a message.

Each case runs two real processes joined by a socket pair (a
:class:`pmca.world.PairWorld`), or one for a world of one rank. Before
finalize exchanged LEAVE messages over the btls it waited in a launcher
barrier that moved no data: completed tcp sends queued in the sender were
dropped, a rank that raised or left early stalled itself and its peers for
``pmca_base_modex_timeout`` (60 s), and isends to an sm peer that had
finalized completed and were never received, without a word.

Times are taken with ``time.monotonic()``, one clock for every process of
the host; only where a bound is the point is one asserted, with a margin
for a loaded machine.
"""

from __future__ import annotations

import re
import subprocess
import sys
import textwrap
import time
import warnings

import pytest

import pmca
from pmca.scenarios.ompi_13021 import ofi_unavailable

from ._pairs import BTLS as _BTLS
from ._pairs import HAS_SM as _HAS_SM
from ._pairs import pair as _pair

_LATE_RECEIVER = """
COUNT = 100_000
with pmca.Session(mca=MCA, frameworks=["btl"], world=WORLD) as s:
    if RANK == 0:
        for i in range(COUNT):
            s.p2p.send(1, 5, i.to_bytes(4, "little") + bytes(1020))
        left = time.monotonic()
    else:
        time.sleep(1.0)
        buffer = bytearray(1024)
        received = 0
        try:
            for i in range(COUNT):
                s.p2p.recv(0, 5, buffer, timeout=120)
                assert int.from_bytes(buffer[:4], "little") == i, (i, bytes(buffer[:4]))
                received += 1
        except Exception as exc:
            out(error=repr(exc))
        out(received=received)
if RANK == 0:
    out(finalize=time.monotonic() - left)
"""


@pytest.mark.parametrize("btl", _BTLS)
def test_completed_sends_reach_a_receiver_that_starts_late(pmca_env, tmp_path, btl) -> None:
    """100,000 completed 1 KiB sends, the receiver starting 1 s late: all arrive.

    Before, a tcp sender's finalize dropped what its btl still queued: the
    receiver got a part of them, then ``PeerFailed``.
    """
    sender, receiver = _pair(tmp_path, _LATE_RECEIVER, btl)
    assert receiver.get("received") == 100_000, receiver
    assert "error" not in receiver, receiver
    assert sender["returncode"] == 0 and receiver["returncode"] == 0, (sender, receiver)
    for side in (sender, receiver):
        assert "not delivered" not in side["stderr"], side["stderr"]
        assert "never received" not in side["stderr"], side["stderr"]
        assert "did not acknowledge" not in side["stderr"], side["stderr"]


_STALLED_RECEIVER = """
import os
COUNT, FINALIZING = 100_000, sys.argv[4]
MCA.update(pmca_base_finalize_timeout=2, pmca_base_modex_timeout=30)
with pmca.Session(mca=MCA, frameworks=["btl"], world=WORLD) as s:
    if RANK == 0:
        requests = [s.p2p.isend(1, 5, i.to_bytes(4, "little") + bytes(1020)) for i in range(COUNT)]
        left = time.monotonic()
        open(FINALIZING, "w").close()
    else:
        # Reads nothing while rank 0 finalizes: from its finalize's start (not
        # from this rank's, however long the isends took) to well past its bound.
        wait_for_file(FINALIZING, 120)
        time.sleep(6.0)
        received, error = receive_numbered(s, 0, 5, 1024, PeerFailed)
        out(received=received, error=str(error))
if RANK == 0:
    out(
        finalize=time.monotonic() - left,
        failed=sum(r.error is not None for r in requests),
        completed=sum(r.done and r.error is None for r in requests),
    )
"""


def test_finalize_gives_up_within_its_bound_naming_exactly_what_was_not_delivered(
    pmca_env, tmp_path
) -> None:
    """100,000 isends over tcp to a rank that reads nothing while the sender finalizes.

    The sender's finalize returns within ``pmca_base_finalize_timeout`` (2 s,
    plus a margin for a loaded machine; its peer-wait bound is 30 s) and names
    what it could not deliver: the pending sends, which fail, and the
    completed ones btl/tcp still queued, and that its LEAVE, queued behind
    them, was never sent (before, dropping it counted it as handed over).
    The receiver, reading later, gets exactly the rest, in order.
    """
    finalizing = str(tmp_path / "finalizing")
    sender, receiver = _pair(tmp_path, _STALLED_RECEIVER, "self,tcp", finalizing)
    assert sender["finalize"] < 2.0 + 8.0, sender
    assert sender["failed"] + sender["completed"] == 100_000, sender
    stderr = sender["stderr"]
    failed = re.search(r"(\d+) sends? not delivered \(not delivered within 2 s", stderr)
    assert failed and int(failed[1]) == sender["failed"] > 0, stderr
    pattern = r"(\d+) messages? not delivered \(completed, still queued in a btl\)"
    assert len(re.findall(pattern, stderr)) <= 1, stderr  # said once, with the silent peer
    held = re.search(pattern, stderr)
    queued = int(held[1]) if held else 0
    assert "this rank's LEAVE to rank(s) 1 was still queued behind data" in stderr, stderr
    assert receiver["received"] == 100_000 - sender["failed"] - queued, (receiver, sender, stderr)


_RAISES = """
with_error = sys.argv[4] == "error"
if RANK == 1:
    try:
        with pmca.Session(mca=MCA, frameworks=["btl"], world=WORLD) as s:
            s.p2p.send(0, 1, b"ready")
            time.sleep(0.5)
            out(left_at=time.monotonic())
            if with_error:
                raise RuntimeError("the program failed")
    except RuntimeError:
        pass
    out(finalized_at=time.monotonic())
else:
    with pmca.Session(mca=MCA, frameworks=["btl"], world=WORLD) as s:
        s.p2p.recv(1, 1, bytearray(5), timeout=60)
        try:
            s.p2p.recv(1, 2, bytearray(8), timeout=30)
            out(outcome="received")
        except PeerFinalized as exc:
            out(outcome="PeerFinalized", learned_at=time.monotonic(), error=str(exc),
                after_error=exc.after_error, rank_named=exc.rank)
        except Exception as exc:
            out(outcome=type(exc).__name__, error=str(exc))
        try:
            s.p2p.isend(1, 3, b"late")
            out(later_send="accepted")
        except PeerFinalized:
            out(later_send="PeerFinalized")
"""


@pytest.mark.parametrize("btl", _BTLS)
@pytest.mark.parametrize("how", ["error", "normal"])
def test_a_peer_waiting_on_a_rank_that_left_fails_at_once(pmca_env, tmp_path, btl, how) -> None:
    """Rank 1 leaves its session (raising, or normally) while rank 0 waits on it.

    Rank 0's receive fails with ``PeerFinalized`` naming rank 1 within 2 s
    (the point of the test), a later send to rank 1 fails at once, and rank
    1's finalize does not wait for anything it cannot get. Before, rank 0
    waited until its own timeout and rank 1's finalize 60 s.
    """
    waiter, leaver = _pair(tmp_path, _RAISES, btl, how)
    assert waiter.get("outcome") == "PeerFinalized", waiter
    assert waiter["rank_named"] == 1 and "rank 1 finalized" in waiter["error"], waiter
    assert waiter["after_error"] is (how == "error"), waiter
    assert ("finalized its session after an error" in waiter["error"]) is (how == "error"), waiter
    learned = waiter["learned_at"] - leaver["left_at"]
    assert learned < 2.0, f"rank 0 learned {learned:.2f} s after rank 1 left"
    assert waiter.get("later_send") == "PeerFinalized", waiter
    took = leaver["finalized_at"] - leaver["left_at"]
    assert took < 5.0 + 5.0, f"rank 1's finalize took {took:.2f} s"  # its bound, plus margin
    assert waiter["returncode"] == 0 and leaver["returncode"] == 0, (waiter, leaver)
    assert "peer failed" not in waiter["stderr"], waiter["stderr"]


_ISENDS_TO_A_FINALIZED_PEER = """
with pmca.Session(mca=MCA, frameworks=["btl"], world=WORLD) as s:
    if RANK == 1:
        time.sleep(1.0)  # rank 0 is in (or past) its finalize by now
        requests = [s.p2p.isend(0, 9, bytes(64)) for _ in range(200)]
        outcomes = []
        for request in requests:
            try:
                request.wait(timeout=60)
                outcomes.append("sent")
            except PeerFinalized:
                outcomes.append("PeerFinalized")
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:  # progress until this rank hears of rank 0's LEAVE
            try:
                s.p2p.iprobe(0, 10)
            except PeerFinalized:
                break
        try:
            s.p2p.isend(0, 9, bytes(64))
            out(outcomes=outcomes, after="accepted")
        except PeerFinalized as exc:
            out(outcomes=outcomes, after="PeerFinalized", error=str(exc))
    else:
        started = time.monotonic()
if RANK == 0:
    out(finalize=time.monotonic() - started)
"""


@pytest.mark.skipif(not _HAS_SM, reason="btl sm is not built in")
def test_isends_to_a_finalized_sm_peer_are_reported(pmca_env, tmp_path) -> None:
    """200 isends over sm to a rank that finalized: reported by it, never silently lost.

    Every isend made before rank 1 heard that rank 0 left (at its next
    progress) is received into rank 0 before it closes and named in its one
    warning (peer, tag, count, bytes); once rank 1 progressed, the next isend
    fails at once with ``PeerFinalized``. Before, all completed and nobody
    ever said they were not received.
    """
    finalized, sender = _pair(tmp_path, _ISENDS_TO_A_FINALIZED_PEER, "self,sm")
    assert sender.get("after") == "PeerFinalized", sender
    sent = sender["outcomes"].count("sent")
    assert sent + sender["outcomes"].count("PeerFinalized") == 200, sender
    assert "never received" in finalized["stderr"], finalized["stderr"]
    assert f"from rank 1 tag 9: {sent} messages, {64 * sent} bytes" in finalized["stderr"], (
        sent,
        finalized["stderr"],
    )
    assert finalized["returncode"] == 0 and sender["returncode"] == 0, (finalized, sender)


_SENDS_AFTER_THE_SEGMENT_CLOSED = """
import os
MARKER = sys.argv[4]
MCA.update(pmca_base_finalize_timeout=1)
if RANK == 1:
    try:
        with pmca.Session(mca=MCA, frameworks=["btl"], world=WORLD) as s:
            s.p2p.recv(0, 1, bytearray(5), timeout=60)
            raise RuntimeError("this rank leaves at once")
    except RuntimeError:
        pass
    out(closed_at=time.monotonic())
    wait_for_file(MARKER, 10.0)  # finalized and alive until rank 0 is done
else:
    with pmca.Session(mca=MCA, frameworks=["btl"], world=WORLD) as s:
        s.p2p.send(1, 1, b"ready")
        time.sleep(4.0)  # no progress: rank 1 stops waiting for this rank's word and closes
        outcomes = {}
        for name, call in (
            ("isend", lambda: s.p2p.isend(1, 9, bytes(64))),
            ("send", lambda: s.p2p.send(1, 9, bytes(64))),
            ("isend-8k", lambda: s.p2p.isend(1, 9, bytes(8192)).wait(timeout=60)),
        ):
            try:
                call()
                outcomes[name] = "accepted"
            except PeerFinalized as exc:
                outcomes[name] = f"PeerFinalized rank {exc.rank}: {exc}"
        out(outcomes=outcomes)
        open(MARKER, "w").close()
"""


@pytest.mark.skipif(not _HAS_SM, reason="btl sm is not built in")
def test_sends_to_an_sm_peer_that_closed_its_segment_fail(pmca_env, tmp_path) -> None:
    """Rank 1 finalizes (after an error, its bound 1 s) while rank 0 does not progress,
    closes its sm segment and stays alive; rank 0's next sends, which have not yet
    seen rank 1's LEAVE, fail with ``PeerFinalized`` naming rank 1. Before, they
    completed and were lost without a word. Rank 1's warning names rank 0 as not
    acknowledging, within the bound of a finalize after an error."""
    marker = str(tmp_path / "done")
    sender, closed = _pair(tmp_path, _SENDS_AFTER_THE_SEGMENT_CLOSED, "self,sm", marker)
    outcomes = sender["outcomes"]
    assert set(outcomes) == {"isend", "send", "isend-8k"}, sender
    for name, outcome in outcomes.items():
        assert outcome.startswith("PeerFinalized rank 1: "), (name, outcome)
        assert "rank 1 finalized" in outcome, (name, outcome)
    # Rank 1 names the peer it stopped waiting for, and the bound of a finalize after an error.
    said = (
        "rank(s) 0 did not acknowledge that this rank left within 1 s (pmca_base_finalize_timeout)"
    )
    assert said in closed["stderr"], closed["stderr"]
    assert sender["returncode"] == 0 and closed["returncode"] == 0, (sender, closed)


_UNMATCHED_SEND_TO_SELF = textwrap.dedent(
    """
    import sys, time
    import pmca

    with pmca.Session() as s:
        try:
            s.p2p.send(0, 1, bytes(8 << 20), timeout=2)
            print("sent", flush=True)
        except TimeoutError:
            print("TimeoutError", flush=True)
        leaving = time.monotonic()
    print(f"left {time.monotonic() - leaving:.3f}", flush=True)
    """
)


def test_an_unmatched_send_to_itself_is_reported_and_finalize_returns(pmca_env) -> None:
    """A single process's 8 MiB send to itself nobody receives: ``TimeoutError``, then the
    block exits at once, naming the send (before: 60 s, and not a word)."""
    done = subprocess.run(
        [sys.executable, "-c", _UNMATCHED_SEND_TO_SELF],
        capture_output=True,
        text=True,
        timeout=180,
    )
    lines = done.stdout.split("\n")
    assert lines[0] == "TimeoutError", done.stdout + done.stderr
    took = float(lines[1].split()[1])
    assert took < 5.0 + 5.0, f"leaving the block took {took:.2f} s"  # the bound, plus margin
    assert "1 send not delivered" in done.stderr, done.stderr
    assert "to rank 0 tag 1: 1 message, 8388608 bytes" in done.stderr, done.stderr
    assert done.returncode == 0, done.stderr


_UNREACHED_PEER = """
MCA.update(pmca_base_modex_timeout=10)
with pmca.Session(mca=MCA, frameworks=["btl"], world=WORLD) as s:
    out(routes=len(s._data_path().bml.peer(1 - RANK).send))
    left = time.monotonic()
out(took=time.monotonic() - left)
"""


def test_a_peer_no_btl_reaches_is_not_told_and_not_waited_for(pmca_env, tmp_path) -> None:
    """Two ranks with btl ``self`` only: neither reaches the other, so neither sends
    it a LEAVE nor waits for its answer; each leaves the block at once and says
    nothing (with the peer counted as told, each waited the whole peer-wait
    bound, 10 s here, and reported it silent)."""
    ranks = _pair(tmp_path, _UNREACHED_PEER, "self", timeout=120)
    for rank in ranks:
        assert rank["routes"] == 0, rank  # the case under test
        assert rank["took"] < 5.0, rank  # half the bound
        assert "did not acknowledge" not in rank["stderr"], rank["stderr"]
        assert rank["returncode"] == 0, rank


_LEFT_AND_CLOSED = """
MARKER = sys.argv[4]
MCA.update(pmca_base_modex_timeout=10)
if RANK == 1:
    with pmca.Session(mca=MCA, frameworks=["btl"], world=WORLD) as s:
        s.p2p.recv(0, 1, bytearray(5), timeout=60)
    wait_for_file(MARKER, 15.0)  # finalized and alive until rank 0 is done
else:
    with pmca.Session(mca=MCA, frameworks=["btl"], world=WORLD) as s:
        s.p2p.send(1, 1, b"ready")
        try:
            s.p2p.recv(1, 2, bytearray(4), timeout=60)
        except PeerFinalized:
            time.sleep(0.5)  # rank 1 has its answer and closes meanwhile
        left = time.monotonic()
    out(took=time.monotonic() - left)
    open(MARKER, "w").close()
"""


@pytest.mark.skipif(ofi_unavailable() is not None, reason="no libfabric")
def test_a_peer_that_left_is_not_told_again_when_its_close_goes_unseen(pmca_env, tmp_path) -> None:
    """Over btl ofi, which sees no peer close its endpoint: rank 1 leaves (rank 0
    answers its LEAVE) and closes while staying alive; rank 0 then leaves at once
    and says nothing (sending rank 1 a LEAVE too, it waited the whole peer-wait
    bound, 10 s here, for an answer that never came, and named rank 1 silent)."""
    marker = str(tmp_path / "done")
    leaver, _ = _pair(tmp_path, _LEFT_AND_CLOSED, "self,ofi", marker, timeout=120)
    assert leaver["took"] < 5.0, leaver  # half the bound
    assert "did not acknowledge" not in leaver["stderr"], leaver["stderr"]
    assert leaver["returncode"] == 0, leaver


_POSTED_FOR_A_LEAVER = """
with pmca.Session(mca=MCA, frameworks=["btl"], world=WORLD) as s:
    if RANK == 1:
        request = s.p2p.irecv(0, 5, bytearray(8))
        WORLD.barrier(timeout=60)
        deadline = time.monotonic() + 20
        while not request.test() and time.monotonic() < deadline:
            time.sleep(0.001)  # test() progresses: rank 0's LEAVE is heard here
        out(done=request.test(), error=type(request.error).__name__)
    else:
        WORLD.barrier(timeout=60)
"""


@pytest.mark.parametrize("btl", _BTLS)
def test_a_receive_posted_for_a_rank_that_leaves_finishes_with_its_error(
    pmca_env, tmp_path, btl
) -> None:
    """``irecv(0, tag)`` posted, then rank 0 leaves: ``test()`` alone sees it finish.

    Hearing the LEAVE finishes every receive posted for that rank with
    ``PeerFinalized``; with the specific (non-wildcard) posted receives left
    out of that sweep, the request stayed pending (only ``wait`` noticed).
    """
    leaver, waiter = _pair(tmp_path, _POSTED_FOR_A_LEAVER, btl, timeout=60)
    assert waiter.get("done") is True and waiter.get("error") == "PeerFinalized", waiter
    assert waiter["returncode"] == 0 and leaver["returncode"] == 0, (waiter, leaver)


_DIES_WHILE_RECEIVES_WAIT = """
import os
with pmca.Session(mca=MCA, frameworks=["btl"], world=WORLD) as s:
    if RANK == 1:
        s.p2p.recv(0, 2, bytearray(4), timeout=60)
        os._exit(0)  # no finalize, no LEAVE: rank 0 sees its connection fail
    import gc, weakref

    class Buffer(bytearray):  # a bytearray that can be watched with a weak reference
        pass

    mine, theirs = bytearray(8), Buffer(8)
    from_self = s.p2p.irecv(0, 3, mine)
    from_peer = s.p2p.irecv(1, 3, theirs)
    s.p2p.send(1, 2, b"die!")
    try:
        from_peer.wait(timeout=60)
        out(peer="completed")
    except (PeerFailed, PeerFinalized) as exc:
        out(peer=type(exc).__name__)
    watched = weakref.ref(theirs)
    del from_peer, theirs
    gc.collect()
    out(forgotten=watched() is None)  # nothing of pmca's holds the failed receive's buffer
    s.p2p.send(0, 3, b"to me")
    out(from_self=from_self.wait(timeout=10), data=bytes(mine[:5]).decode())
"""


@pytest.mark.parametrize("btl", _BTLS)
def test_a_failed_peer_takes_only_its_own_posted_receives_with_it(pmca_env, tmp_path, btl) -> None:
    """Rank 1 dies while rank 0 waits on it and on itself: only rank 1's receive fails.

    The failed receive is forgotten (its buffer is not kept alive), and the
    receive rank 0 posted for its own message stays posted and takes it.
    """
    waiter, dead = _pair(tmp_path, _DIES_WHILE_RECEIVES_WAIT, btl)
    assert waiter.get("peer") in ("PeerFailed", "PeerFinalized"), waiter
    assert waiter.get("forgotten") is True, waiter
    assert (waiter.get("from_self"), waiter.get("data")) == (5, "to me"), waiter
    assert dead["returncode"] == 0, dead


def test_a_receive_left_posted_does_not_hold_finalize_back(pmca_env) -> None:
    """Finalize waits for this rank's sends, never for its receives: one posted for a
    message that never comes leaves the block at once (not after the drain bound)."""
    mca = {"btl": "self", "pmca_base_finalize_timeout": 60}
    with (
        warnings.catch_warnings(record=True) as said,
        pmca.Session(mca=mca, frameworks=["btl"]) as session,
    ):
        warnings.simplefilter("always")
        waiting = session.p2p.irecv(0, 9, bytearray(4))
        left = time.monotonic()
    took = time.monotonic() - left
    assert took < 30.0, f"leaving the block took {took:.2f} s"  # half the bound
    assert waiting.test() and waiting.error is not None  # ended by the close, not received
    # A receive is never a send not delivered: finalize has nothing to say of it.
    assert not [w for w in said if issubclass(w.category, pmca.p2p.FinalizeWarning)], said


def test_sends_to_itself_a_receive_matched_complete_at_finalize(pmca_env) -> None:
    """A 64 KiB and an 8 MiB isend to itself, each matched by a posted receive and
    left to finalize: finalize's own progress completes both sides and says
    nothing (stopping at its first busy round, it failed the sends as never
    received, and the close failed their receives)."""
    data = {size: bytes(range(256)) * (size // 256) for size in (64 << 10, 8 << 20)}
    mca = {"btl": "self"}
    with (
        warnings.catch_warnings(record=True) as said,
        pmca.Session(mca=mca, frameworks=["btl"]) as session,
    ):
        warnings.simplefilter("always")
        pairs = [
            (session.p2p.irecv(0, tag, bytearray(len(body))), session.p2p.isend(0, tag, body))
            for tag, body in enumerate(data.values(), 1)
        ]
    for receive, send in pairs:
        assert receive.test() and receive.error is None, receive.error
        assert send.test() and send.error is None, send.error
        assert bytes(receive.view) == data[len(receive.view)]
    assert not [w for w in said if issubclass(w.category, pmca.p2p.FinalizeWarning)], said
