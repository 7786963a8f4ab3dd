"""A rendezvous send to a rank that finalized without receiving it fails at its LEAVE.

The receiver of a large (rendezvous) message finalizes without matching it
and stays alive. Before, the sender's ``send`` (and ``isend`` + ``wait``)
waited until that process exited, because only the closing connection
failed it; now the peer's LEAVE fails it with
:class:`pmca.btl.PeerFinalized`. A LEAVE travels behind every FIN its rank
sent on the same route, and a finalizing rank neither starts a read after
its LEAVE nor sends its LEAVE while a read from that peer is under way, so
a rendezvous send still waiting for its answer when the LEAVE takes effect
can never be answered.

Two real processes (:mod:`._pairs`); times on the host's one monotonic clock.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from pmca.scenarios.ompi_13021 import ofi_unavailable

from ._pairs import BTLS, pair

_OFI = ofi_unavailable() is None
_RENDEZVOUS_BTLS = BTLS + (["self,ofi"] if _OFI else [])

#: Message sizes by case: a blocking sm send of 64 KiB goes through the lane
#: (header and FIN polled natively), the others the general path.
_SIZES = {
    "send-64k": 64 << 10,
    "send-1m": 1 << 20,
    "send-8m": 8 << 20,
    "isend-1m": 1 << 20,
    "isend-8m": 8 << 20,
}
#: The cases that are rendezvous on each btl (tcp sends up to 4 MiB eagerly
#: over one rail: those complete, and the receiver reports them unreceived).
_CASES = (
    [("self,sm", case) for case in ("send-64k", "send-1m", "send-8m", "isend-1m")]
    if "self,sm" in BTLS
    else []
)
_CASES += [("self,tcp", case) for case in ("send-8m", "isend-8m")]
_CASES += [("self,ofi", case) for case in ("send-1m", "isend-1m")] if _OFI else []

_UNMATCHED = """
import os
CASE, MARKER = sys.argv[4], sys.argv[5]
SIZE = int(sys.argv[6])

def send(s):
    if CASE.startswith("isend"):
        s.p2p.isend(1, 5, bytes(SIZE)).wait()
    else:
        s.p2p.send(1, 5, bytes(SIZE))

def attempt(s):
    try:
        send(s)
        return {"outcome": "sent"}
    except Exception as exc:
        return {"outcome": type(exc).__name__, "error": str(exc),
                "rank_named": getattr(exc, "rank", None), "at": time.monotonic()}

with pmca.Session(mca=MCA, frameworks=["btl"], world=WORLD) as s:
    if RANK == 1:
        s.p2p.recv(0, 1, bytearray(5), timeout=60)
        time.sleep(0.5)  # rank 0's rendezvous header arrives meanwhile; never received
        out(left_at=time.monotonic())
    else:
        s.p2p.send(1, 1, b"ready")
        out(first=attempt(s))
        began = time.monotonic()
        out(later=attempt(s), later_took=time.monotonic() - began)
        open(MARKER, "w").close()
if RANK == 1:
    wait_for_file(MARKER, 10.0)  # alive, finalized, until rank 0 is done (at most 10 s)
"""


@pytest.mark.parametrize(("btl", "case"), _CASES, ids=[f"{b}-{c}" for b, c in _CASES])
def test_a_rendezvous_send_fails_when_its_receiver_finalizes_without_it(
    pmca_env, tmp_path: Path, btl: str, case: str
) -> None:
    """The receiver finalizes without receiving and stays alive (up to 10 s).

    The sender's send fails with ``PeerFinalized`` naming rank 1 within
    2 s of rank 1 leaving its session (before: when rank 1 exited,
    10 s here); the same send posted afterwards fails at once, and rank 1's
    finalize names the message it never received.
    """
    size = _SIZES[case]
    marker = tmp_path / "done"
    sender, receiver = pair(tmp_path, _UNMATCHED, btl, case, str(marker), str(size))
    first = sender["first"]
    assert first["outcome"] == "PeerFinalized", sender
    assert first["rank_named"] == 1 and "rank 1 finalized" in first["error"], first
    assert f"tag 5, {size} bytes" in first["error"], first
    assert "after an error" not in first["error"], first  # rank 1 left normally
    learned = first["at"] - receiver["left_at"]
    assert learned < 2.0, f"rank 0 learned {learned:.2f} s after rank 1 left: {sender}"
    later = sender["later"]
    assert later["outcome"] == "PeerFinalized" and later["rank_named"] == 1, sender
    assert f"from rank 0 tag 5: 1 message, {size} bytes" in receiver["stderr"], receiver
    assert sender["returncode"] == 0 and receiver["returncode"] == 0, (sender, receiver)


_READ_UNDER_WAY = """
MCA.update(pmca_base_finalize_timeout=20)
with pmca.Session(mca=MCA, frameworks=["btl"], world=WORLD) as s:
    if RANK == 1:
        s.p2p.probe(0, 5, timeout=60)  # the rendezvous header is here
        buffer = bytearray(8 << 20)
        request = s.p2p.irecv(0, 5, buffer)  # its read starts; this rank leaves at once
        left = time.monotonic()
    else:
        try:
            s.p2p.send(1, 5, bytes(range(256)) * (8 << 12), timeout=60)
            out(outcome="sent")
        except Exception as exc:
            out(outcome=type(exc).__name__, error=str(exc))
        deadline, heard = time.monotonic() + 10, False
        try:  # progress (not leaving) until rank 1's LEAVE comes: it follows the FIN
            while time.monotonic() < deadline:
                s.p2p.iprobe(1, 99)
        except PeerFinalized:
            heard = True
        out(heard=heard)
if RANK == 1:
    intact = buffer == bytes(range(256)) * (8 << 12)
    out(done=request.done, error=repr(request.error), intact=intact)
    out(finalize=time.monotonic() - left)
"""


@pytest.mark.parametrize("btl", _RENDEZVOUS_BTLS)
def test_a_read_under_way_at_finalize_completes_on_both_sides(
    pmca_env, tmp_path: Path, btl: str
) -> None:
    """Rank 1 matches an 8 MiB rendezvous and finalizes while reading it.

    Its finalize finishes the read and answers FIN before its LEAVE, so both
    sides agree: the receive completed with every byte and the send
    succeeded (a LEAVE ahead of the FIN would have failed a send whose
    message was delivered). The LEAVE follows as soon as the read ended (rank 0,
    progressing, hears it), not at the finalize bound (20 s here).
    """
    sender, receiver = pair(tmp_path, _READ_UNDER_WAY, btl)
    assert sender.get("outcome") == "sent", (sender, receiver["stderr"])
    assert receiver["done"] and receiver["error"] == "None" and receiver["intact"], receiver
    assert sender["heard"] is True and receiver["finalize"] < 10.0, (sender, receiver)
    assert sender["returncode"] == 0 and receiver["returncode"] == 0, (sender, receiver)


_SENT_AFTER_THE_LEAVE = """
with pmca.Session(mca=MCA, frameworks=["btl"], world=WORLD) as s:
    if RANK == 1:
        buffer = bytearray(8 << 20)
        request = s.p2p.irecv(0, 5, buffer)  # posted, never waited for
        s.p2p.send(0, 1, b"ready")  # then this rank leaves, without progressing between
    else:
        s.p2p.recv(1, 1, bytearray(5), timeout=60)
        # Rank 1's send of "ready" progresses until it completes, and could match
        # a header that came meanwhile: the header goes out once that send is
        # long over, when rank 1's next step is its LEAVE.
        time.sleep(1.0)
        try:
            s.p2p.isend(1, 5, bytes(8 << 20)).wait(timeout=60)
            out(outcome="sent")
        except PeerFinalized as exc:
            out(outcome="PeerFinalized", error=str(exc))
if RANK == 1:
    out(done=request.done, error=repr(request.error), count=request.nbytes)
"""


@pytest.mark.parametrize("btl", _RENDEZVOUS_BTLS)
def test_a_rendezvous_that_arrives_after_the_leave_is_not_read(
    pmca_env, tmp_path: Path, btl: str
) -> None:
    """Rank 0's 8 MiB send reaches rank 1 after rank 1 said LEAVE, though a receive of
    rank 1's would match it: rank 1 does not read it (its FIN would come after the
    LEAVE, which fails the send), so both sides agree that it was not received.
    Without the rule rank 1's receive completed while rank 0's send failed."""
    sender, receiver = pair(tmp_path, _SENT_AFTER_THE_LEAVE, btl)
    assert sender.get("outcome") == "PeerFinalized", (sender, receiver["stderr"])
    assert receiver["done"] and receiver["error"] != "None", receiver
    if "without receiving this message" in sender["error"]:  # its header went out
        assert "from rank 0 tag 5: 1 message, 8388608 bytes" in receiver["stderr"], receiver
    assert sender["returncode"] == 0 and receiver["returncode"] == 0, (sender, receiver)


#: Rank 0 runs ``late(s, s.p2p, started)`` on another thread and finalizes once it
#: set ``started``; rank 1 does not progress meanwhile, so rank 0's finalize waits.
_WHILE_RANK_0_FINALIZES = """
if RANK == 0:
    started = threading.Event()
    with pmca.Session(mca=MCA, frameworks=["btl"], world=WORLD) as s:
        s.p2p.recv(1, 1, bytearray(5), timeout=60)
        thread = threading.Thread(target=late, args=(s, s.p2p, started))
        thread.start()
        started.wait(60)
    thread.join()
    out(results=results)
else:
    with pmca.Session(mca=MCA, frameworks=["btl"], world=WORLD) as s:
        s.p2p.send(0, 1, b"ready")
        time.sleep(3.0)  # no progress: rank 0's finalize waits for this rank's word
"""


_LATE_OPERATIONS = """
import threading
from pmca.btl import BtlError

results = {}

def late(s, p2p, started):
    started.set()
    time.sleep(1.0)  # the main thread is in its finalize by now
    for name, call in (
        ("isend", lambda: p2p.isend(1, 3, b"late")),
        ("send", lambda: p2p.send(1, 3, bytes(1 << 20))),
        ("irecv", lambda: p2p.irecv(1, 3, bytearray(8))),
        ("recv", lambda: p2p.recv(1, 3, bytearray(8))),
        ("iprobe", lambda: p2p.iprobe(1, 3)),
        ("s.p2p", lambda: s.p2p),
    ):
        try:
            call()
            results[name] = "accepted"
        except (BtlError, pmca.SessionError) as exc:
            results[name] = str(exc)

"""


@pytest.mark.parametrize("btl", BTLS)
def test_operations_posted_while_the_session_finalizes_are_refused(
    pmca_env, tmp_path: Path, btl: str
) -> None:
    """Another thread's send or receive after this rank's LEAVE raises at once, saying
    that the session is finalizing (before: accepted, then failed or lost at close)."""
    finalizing, _ = pair(tmp_path, _LATE_OPERATIONS + _WHILE_RANK_0_FINALIZES, btl)
    results = finalizing["results"]
    assert set(results) == {"isend", "send", "irecv", "recv", "iprobe", "s.p2p"}, finalizing
    for name in ("isend", "send", "irecv", "recv", "iprobe"):
        assert "rank 0's session is finalizing" in results[name], (name, results)
    assert "session is finalizing" in results["s.p2p"], results
    assert finalizing["returncode"] == 0, finalizing


_PAST_THE_CHECK = """
import threading
from pmca.btl import BtlError

results = {}

def late(s, p2p, started):
    def hold(frame, event, arg):
        # Right after isend's first look at whether the session is open (it
        # was): wait there until finalize has begun, then go on to send.
        if event == "return" and frame.f_code.co_name == "_ensure_open":
            sys.setprofile(None)
            started.set()
            deadline = time.monotonic() + 60
            while not p2p._closed and time.monotonic() < deadline:
                time.sleep(0.01)
            time.sleep(0.2)  # its LEAVE goes out meanwhile

    sys.setprofile(hold)
    try:
        p2p.isend(1, 3, b"late")
        results["isend"] = "accepted"
    except BtlError as exc:
        results["isend"] = str(exc)
    finally:
        sys.setprofile(None)

"""


@pytest.mark.parametrize("btl", BTLS)
def test_a_send_that_passed_its_open_check_before_finalize_is_still_refused(
    pmca_env, tmp_path: Path, btl: str
) -> None:
    """Another thread's isend found the session open, then finalize began before it
    sent: it is refused, not sent after this rank's LEAVE (before: accepted)."""
    finalizing, _ = pair(tmp_path, _PAST_THE_CHECK + _WHILE_RANK_0_FINALIZES, btl)
    results = finalizing["results"]
    assert "rank 0's session is finalizing" in results.get("isend", ""), finalizing
    assert finalizing["returncode"] == 0, finalizing


_ARRIVED_WHILE_FINALIZING = """
import os
import threading
from pmca.btl import BtlError

SIGNALS = sys.argv[4]  # a directory both ranks see: what each has done

def say(name):
    open(os.path.join(SIGNALS, name), "w").close()

def heard(name):
    wait_for_file(os.path.join(SIGNALS, name), 60)

def late(p2p, results):
    deadline = time.monotonic() + 60
    while not p2p._closed and time.monotonic() < deadline:
        time.sleep(0.01)
    # Progress held back (the finalizing thread waits for this lock) until rank
    # 1's message is in this rank's socket or FIFO, unread: a lane would take it.
    with p2p._bml.lock:
        say("holding")
        heard("sent")
        time.sleep(0.2)  # through the loopback by now
        try:
            results["recv"] = f"received {p2p.recv(1, 3, bytearray(8))} bytes"
        except BtlError as exc:
            results["recv"] = str(exc)

with pmca.Session(mca=MCA, frameworks=["btl"], world=WORLD) as s:
    if RANK == 0:
        results = {}
        s.p2p.recv(1, 1, bytearray(5), timeout=60)
        thread = threading.Thread(target=late, args=(s.p2p, results))
        thread.start()
    else:
        s.p2p.send(0, 1, b"ready")
        heard("holding")
        s.p2p.send(0, 3, b"late")  # no progress since: this rank has not seen a LEAVE
        say("sent")
if RANK == 0:
    thread.join()
    out(results=results)
"""


@pytest.mark.parametrize("btl", BTLS)
def test_a_receive_whose_message_waited_unread_is_refused_while_the_session_finalizes(
    pmca_env, tmp_path: Path, btl: str
) -> None:
    """Another thread's blocking receive during finalize is refused, saying the session
    is finalizing, though the message it names is in this rank's socket or FIFO,
    unread: the lane, which would take it, is not tried once the session closes."""
    finalizing, other = pair(tmp_path, _ARRIVED_WHILE_FINALIZING, btl, str(tmp_path))
    assert "rank 0's session is finalizing" in finalizing["results"]["recv"], finalizing
    assert finalizing["returncode"] == 0 and other["returncode"] == 0, (finalizing, other)


_UNREGISTERABLE = """
import errno
MCA.update(pmca_base_finalize_timeout=5)
with pmca.Session(mca=MCA, frameworks=["btl"], world=WORLD) as s:
    if RANK == 1:
        ofi = next(m for m in s.modules("btl") if m.name == "ofi")

        def refuse(self, endpoint, base, size):
            raise OSError(errno.ENOMEM, f"cannot register the {size}-byte receive buffer")

        type(ofi).register_mem = refuse  # this process's reads cannot register their buffer
        s.p2p.probe(0, 5, timeout=60)  # the rendezvous header is here
        request = None
        try:
            request = s.p2p.irecv(0, 5, bytearray(8 << 20))  # its read cannot start
            request.wait(timeout=60)
            out(outcome="received")
        except Exception as exc:
            done = request is not None and request.done
            out(outcome=type(exc).__name__, error=str(exc), done=done)
    else:
        try:
            s.p2p.send(1, 5, bytes(8 << 20), timeout=60)
            out(outcome="sent")
        except Exception as exc:
            out(outcome=type(exc).__name__, error=str(exc))
"""


@pytest.mark.skipif(not _OFI, reason="no libfabric")
def test_a_read_that_cannot_register_its_buffer_fails_and_answers_at_once(
    pmca_env, tmp_path: Path
) -> None:
    """Rank 1's read of an 8 MiB rendezvous cannot register its buffer (ofi needs it).

    The receive fails with that error, the sender learns it from the FIN, and
    rank 1's LEAVE does not wait for a read that never started. Before, the
    error escaped ``irecv`` with the read still counted as under way: the
    request never finished, and the LEAVE waited for the whole finalize
    bound, after which the sender's send failed as never received.
    """
    sender, receiver = pair(tmp_path, _UNREGISTERABLE, "self,ofi")
    assert receiver["outcome"] == "OSError" and receiver["done"], receiver
    assert "cannot register the 8388608-byte receive buffer" in receiver["error"], receiver
    assert sender["outcome"] == "BtlError", (sender, receiver["stderr"])
    assert "rank 1 failed to read the 8388608-byte message" in sender["error"], sender
    assert sender["returncode"] == 0 and receiver["returncode"] == 0, (sender, receiver)


_TWO_READS_UNDER_WAY = """
with pmca.Session(mca=MCA, frameworks=["btl"], world=WORLD) as s:
    if RANK == 1:
        s.p2p.probe(0, 5, timeout=60)
        s.p2p.probe(0, 6, timeout=60)  # both rendezvous headers are here
        buffers = [bytearray(8 << 20), bytearray(8 << 20)]
        requests = [s.p2p.irecv(0, 5 + i, buffers[i]) for i in range(2)]  # both reads start
    else:
        sends = [s.p2p.isend(1, 5 + i, bytes([i + 1]) * (8 << 20)) for i in range(2)]
        out(outcomes=outcomes_of(sends))
if RANK == 1:
    intact = [buffers[i] == bytes([i + 1]) * (8 << 20) for i in range(2)]
    out(done=[r.done and r.error is None for r in requests], intact=intact)
"""


@pytest.mark.parametrize("btl", _RENDEZVOUS_BTLS)
def test_two_reads_under_way_at_finalize_both_complete_on_both_sides(
    pmca_env, tmp_path: Path, btl: str
) -> None:
    """Rank 1 finalizes while reading two rendezvous from rank 0: its LEAVE waits for
    both reads' FINs (not for the first only), so both sends succeed."""
    sender, receiver = pair(tmp_path, _TWO_READS_UNDER_WAY, btl)
    assert sender.get("outcomes") == ["sent", "sent"], (sender, receiver["stderr"])
    assert receiver["done"] == [True, True] and receiver["intact"] == [True, True], receiver
    assert sender["returncode"] == 0 and receiver["returncode"] == 0, (sender, receiver)


_PUSHED_AFTER_THE_LEAVE = """
MCA["btl_sm_single_copy_mechanism"] = "none"  # no get: the sender pushes fragments
DATA = bytes(range(256)) * (8 << 12)
with pmca.Session(mca=MCA, frameworks=["btl"], world=WORLD) as s:
    if RANK == 1:
        buffer = bytearray(8 << 20)
        request = s.p2p.irecv(0, 5, buffer)
        s.p2p.send(0, 1, b"ready")
        deadline = time.monotonic() + 60
        try:
            while time.monotonic() < deadline:  # progress until rank 0's LEAVE is heard
                s.p2p.iprobe(0, 99)
        except PeerFinalized:
            pass
        out(rdma=len(s._data_path().bml.peer(0).rdma), done_before=request.done)
    else:
        s.p2p.recv(1, 1, bytearray(5), timeout=60)
        large = s.p2p.isend(1, 5, DATA)  # this rank leaves at once
if RANK == 1:
    out(done=request.done, error=repr(request.error), intact=buffer == DATA)
else:
    out(error=repr(large.error))
"""


@pytest.mark.skipif("self,sm" not in BTLS, reason="btl sm is not built in")
def test_fragments_still_coming_at_finalize_are_received_first(pmca_env, tmp_path: Path) -> None:
    """Over sm without single-copy, rank 0 leaves right after an 8 MiB isend: rank 1's
    clear-to-send reaches it in its finalize, so it pushes the fragments behind its
    LEAVE. Rank 1 hears the LEAVE with its receive still filling, then finalizes: it
    takes every fragment first, so the receive completes intact and the send
    succeeds (leaving at once, it failed both)."""
    sender, receiver = pair(tmp_path, _PUSHED_AFTER_THE_LEAVE, "self,sm")
    assert receiver["rdma"] == 0 and receiver["done_before"] is False, receiver  # the case
    assert receiver["done"] and receiver["error"] == "None" and receiver["intact"], receiver
    assert sender["error"] == "None", (sender, receiver["stderr"])
    assert sender["returncode"] == 0 and receiver["returncode"] == 0, (sender, receiver)


_READ_OUTLASTS_THE_BOUND = """
MCA.update(pmca_base_finalize_timeout=1, pmca_base_modex_timeout=30)
with pmca.Session(mca=MCA, frameworks=["btl"], world=WORLD) as s:
    if RANK == 1:
        s.p2p.probe(0, 5, timeout=60)  # the rendezvous header is here
        request = s.p2p.irecv(0, 5, bytearray(8 << 20))  # its read starts; this rank leaves
    else:
        large = s.p2p.isend(1, 5, bytes(8 << 20))
        time.sleep(3.0)  # serves no read meanwhile: rank 1's outlasts its finalize bound
        try:
            large.wait(timeout=60)
            out(outcome="sent")
        except PeerFinalized as exc:
            out(outcome="PeerFinalized", error=str(exc))
        end = time.monotonic() + 1.0
        while time.monotonic() < end:  # serves the rest of rank 1's read before closing
            s.p2p.iprobe(0, 99)
if RANK == 1:
    out(done=request.done, error=repr(request.error))
"""


def test_a_read_that_outlasts_the_finalize_bound_fails_on_both_sides(
    pmca_env, tmp_path: Path
) -> None:
    """Rank 1 finalizes while reading an 8 MiB rendezvous over tcp that rank 0 does
    not serve for 3 s. At its 1 s bound rank 1 sends its LEAVE anyway, and the read
    that ends after it is not answered: both sides agree the message was not
    received (answering it, the receive completed while the send failed; never
    sending that LEAVE, the send succeeded only because rank 1 waited on)."""
    sender, receiver = pair(tmp_path, _READ_OUTLASTS_THE_BOUND, "self,tcp")
    assert sender.get("outcome") == "PeerFinalized", (sender, receiver["stderr"])
    assert "without receiving this message (tag 5, 8388608 bytes)" in sender["error"], sender
    assert receiver["done"] and "ended after this rank told it that it left" in receiver["error"]
    assert sender["returncode"] == 0 and receiver["returncode"] == 0, (sender, receiver)


_A_READ_AFTER_TWO = """
DATA = [bytes([i + 1]) * (8 << 20) for i in range(3)]
with pmca.Session(mca=MCA, frameworks=["btl"], world=WORLD) as s:
    if RANK == 1:
        s.p2p.probe(0, 5, timeout=60)
        s.p2p.probe(0, 6, timeout=60)
        buffers = [bytearray(8 << 20) for _ in range(3)]
        requests = [s.p2p.irecv(0, 5 + i, buffers[i]) for i in range(2)]  # both reads start
        for request in requests:
            request.wait(timeout=60)  # and end
        s.p2p.probe(0, 7, timeout=60)
        requests.append(s.p2p.irecv(0, 7, buffers[2]))  # a third read starts; this rank leaves
    else:
        out(outcomes=outcomes_of([s.p2p.isend(1, 5 + i, DATA[i]) for i in range(3)]))
if RANK == 1:
    out(done=[r.done and r.error is None for r in requests], intact=buffers[2] == DATA[2])
"""


def test_a_read_under_way_after_two_that_ended_still_holds_the_leave(
    pmca_env, tmp_path: Path
) -> None:
    """Over tcp, rank 1 reads two 8 MiB rendezvous at once to their end, then starts a
    third read and finalizes: its LEAVE still waits for that read's FIN, so all three
    sends succeed (counting the first two reads' end wrongly, the LEAVE went ahead
    of the third FIN and both sides failed it)."""
    sender, receiver = pair(tmp_path, _A_READ_AFTER_TWO, "self,tcp")
    assert sender.get("outcomes") == ["sent"] * 3, (sender, receiver["stderr"])
    assert receiver["done"] == [True] * 3 and receiver["intact"], receiver
    assert sender["returncode"] == 0 and receiver["returncode"] == 0, (sender, receiver)
