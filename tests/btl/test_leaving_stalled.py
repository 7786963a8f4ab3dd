"""Finalize gives up on a peer that answers nothing within the bound, and only on it.

The sender's finalize waits at most ``pmca_base_finalize_timeout`` (1 s here)
for its own sends; its peer-wait bound (``pmca_base_modex_timeout``) is 30 s.
Its one send is a rendezvous over tcp: the header and then the LEAVE go out
at once, and the receiver reads nothing from the start of that finalize
until well past its bound (4 s). The send is still pending at the bound:
the sender fails it and stops waiting for that peer then, naming it, even
though no LEAVE of its waits in a btl's queue. A receiver that answers the
LEAVE but never receives the send is not named with it: the send fails, and
nothing says the peer was silent. And a peer that dies while this rank's
LEAVE still waits for room in btl/sm's queue to it is not waited for at all.
What a rank gave up on never reaches that peer later, while the rank still
waits for another (three ranks over a test socket world). A peer that left
first, and stalls while this rank's LEAVE_ACK waits behind data, is never
named silent: it was not told.

Two real processes (:mod:`._pairs`); times on the host's one monotonic clock.
"""

from __future__ import annotations

import json
import re
import textwrap
from pathlib import Path

import pytest

from ._pairs import HAS_SM, pair, run_ranks

_STALLED = """
FINALIZING = sys.argv[4]
MCA.update(pmca_base_finalize_timeout=1, pmca_base_modex_timeout=30)
with pmca.Session(mca=MCA, frameworks=["btl"], world=WORLD) as s:
    if RANK == 0:
        large = s.p2p.isend(1, 6, bytes(8 << 20))  # a rendezvous: its header goes out
        left = time.monotonic()
        open(FINALIZING, "w").close()
    else:
        wait_for_file(FINALIZING, 120)
        if sys.argv[5] == "stalled":
            time.sleep(4.0)  # nothing read from the start of rank 0's finalize to past its bound
        else:
            deadline = time.monotonic() + 60
            try:  # progress (answering rank 0's LEAVE) without ever receiving its send
                while time.monotonic() < deadline:
                    s.p2p.iprobe(0, 99)
            except PeerFinalized:
                time.sleep(2.0)  # rank 0's finalize reaches its bound meanwhile
if RANK == 0:
    out(finalize=time.monotonic() - left, large=f"{type(large.error).__name__}: {large.error}")
"""

#: The send's own error says why it failed (not only that the session closed).
_GIVEN_UP = (
    "BtlError: p2p finalize: a send was dropped: not delivered within 1 s "
    "(pmca_base_finalize_timeout)"
)


def test_a_rendezvous_never_answered_is_given_up_within_the_bound(pmca_env, tmp_path: Path) -> None:
    """An 8 MiB isend whose header and LEAVE both went out, to a receiver that
    answers neither in time: the send fails at the bound, and the sender stops
    waiting for that peer then, naming it once. (Counting as owed only peers with
    a LEAVE still queued, the sender waited for the peer's word until it woke up,
    and said nothing of it.)"""
    finalizing = str(tmp_path / "finalizing")
    sender, receiver = pair(tmp_path, _STALLED, "self,tcp", finalizing, "stalled")
    assert sender["large"] == _GIVEN_UP, sender
    assert sender["finalize"] < 1.0 + 2.5, sender  # the bound and a margin, not the 4 s stall
    stderr = sender["stderr"]
    assert "1 send not delivered (not delivered within 1 s" in stderr, stderr
    silent = "rank(s) 1 did not acknowledge that this rank left within 1 s"
    assert stderr.count(silent) == 1, stderr
    assert "still queued behind data" not in stderr, stderr  # the LEAVE went out
    assert "(pmca_base_finalize_timeout)" in stderr, stderr
    assert sender["returncode"] == 0 and receiver["returncode"] == 0, (sender, receiver)


def test_a_peer_that_acknowledged_is_not_said_silent_when_a_send_to_it_fails(
    pmca_env, tmp_path: Path
) -> None:
    """The same 8 MiB isend, to a receiver that keeps progressing (so it answers the
    LEAVE at once) but never receives it: the send fails at the bound, named, and
    nothing says the peer did not acknowledge (it did; before, being owed a send
    was enough to be named silent)."""
    finalizing = str(tmp_path / "finalizing")
    sender, receiver = pair(tmp_path, _STALLED, "self,tcp", finalizing, "progressing")
    assert sender["large"] == _GIVEN_UP, sender
    stderr = sender["stderr"]
    assert "1 send not delivered (not delivered within 1 s" in stderr, stderr
    assert "did not acknowledge" not in stderr, stderr
    assert sender["returncode"] == 0 and receiver["returncode"] == 0, (sender, receiver)


_DIES_BEFORE_READING = """
FINALIZING = sys.argv[4]
MCA.update(pmca_base_finalize_timeout=2, pmca_base_modex_timeout=10)
with pmca.Session(mca=MCA, frameworks=["btl"], world=WORLD) as s:
    if RANK == 0:
        requests = [s.p2p.isend(1, 5, bytes(1024)) for _ in range(500)]
        out(queued=len(s._data_path().bml.queued_sends(1)))  # no FIFO room: the rest waits
        left = time.monotonic()
        open(FINALIZING, "w").close()
    else:
        wait_for_file(FINALIZING, 60)
        time.sleep(0.5)
        os._exit(0)  # dies unread and unfinalized, rank 0's LEAVE queued behind its data
if RANK == 0:
    out(finalize=time.monotonic() - left, failed=sum(r.error is not None for r in requests))
"""


@pytest.mark.skipif(not HAS_SM, reason="btl sm is not built in")
def test_a_peer_that_dies_with_the_leave_queued_for_it_is_not_waited_for(
    pmca_env, tmp_path: Path
) -> None:
    """Rank 0's LEAVE waits in btl/sm's queue behind 500 isends when rank 1 exits
    without reading: rank 0's finalize ends as soon as it sees the process gone
    (within its 2 s bound), the queued sends fail, and it names no silent peer
    (waiting for that LEAVE to leave, it waited its whole 10 s peer-wait bound and
    then named an empty list of peers)."""
    finalizing = str(tmp_path / "finalizing")
    sender, _ = pair(tmp_path, _DIES_BEFORE_READING, "self,sm", finalizing)
    assert sender["queued"] > 0, sender  # the case under test
    assert sender["finalize"] < 2.0 + 3.0, sender  # the drain bound and a margin, not 10 s
    assert sender["failed"] > 0, sender
    assert "did not acknowledge" not in sender["stderr"], sender["stderr"]
    assert sender["returncode"] == 0, sender


_GIVEN_UP_WHILE_ANOTHER_ANSWERS_LATE = textwrap.dedent(
    """
    import json, os, sys, time
    sys.path.insert(0, {root!r})
    import pmca
    from pmca.btl import PeerFailed
    from tests.btl.sm._world import SocketWorld

    rank, path, finalizing = int(sys.argv[1]), sys.argv[2], sys.argv[3]
    COUNT, SIZE = 2048, 16 * 1024
    world = SocketWorld(rank, 3, path)
    mca = {{"btl": "self,tcp", "btl_tcp_if_include": "127.0.0.1/8",
           "pmca_base_finalize_timeout": 1, "pmca_base_modex_timeout": 30}}
    facts = {{"rank": rank}}
    try:
        with pmca.Session(mca=mca, frameworks=["btl"], world=world) as s:
            world.barrier()
            if rank == 0:
                requests = [
                    s.p2p.isend(1, 5, i.to_bytes(4, "little") + bytes(SIZE - 4))
                    for i in range(COUNT)
                ]
                open(finalizing, "w").close()
            else:
                deadline = time.monotonic() + 60
                while not os.path.exists(finalizing) and time.monotonic() < deadline:
                    time.sleep(0.01)
                if rank == 1:
                    time.sleep(2.0)  # past rank 0's 1 s bound: rank 0 gave this rank up
                    buffer, received = bytearray(SIZE), 0
                    try:
                        while True:
                            s.p2p.recv(0, 5, buffer, timeout=60)
                            assert int.from_bytes(buffer[:4], "little") == received
                            received += 1
                    except PeerFailed:
                        facts["received"] = received
                else:
                    time.sleep(3.0)  # rank 0 still progresses, waiting for this rank
        if rank == 0:
            facts["failed"] = sum(r.error is not None for r in requests)
        print(json.dumps(facts), flush=True)
    finally:
        world.close()
    """
)


def test_what_finalize_gave_up_never_arrives_while_it_waits_for_another_peer(
    pmca_env, tmp_path: Path
) -> None:
    """Three ranks over tcp. Rank 0 finalizes with 32 MiB of isends to rank 1, which
    reads nothing until past rank 0's 1 s bound, while rank 2 answers rank 0's LEAVE
    only after 3 s. Rank 0 gives rank 1 up at its bound and keeps progressing for
    rank 2: what it then said not delivered (the failed sends, the completed messages
    btl/tcp held) never reaches rank 1, which gets exactly the rest, in order.
    (Listing btl/tcp's queue without dropping it, rank 1 got all 2048.)"""
    script = tmp_path / "rank.py"
    root = str(Path(__file__).resolve().parents[2])
    script.write_text(_GIVEN_UP_WHILE_ANOTHER_ANSWERS_LATE.format(root=root))
    where = [str(tmp_path / "world.sock"), str(tmp_path / "finalizing")]
    results = run_ranks(script, 3, *where)
    for returncode, stdout, stderr in results:
        assert returncode == 0, (stdout, stderr)
    (sender, stderr), (receiver, _) = [(json.loads(out), err) for _, out, err in results[:2]]
    assert sender["failed"] > 0, (sender, stderr)  # the case under test: rank 1 was owed
    said = re.search(r"(\d+) messages? not delivered \(completed, still queued in a btl\)", stderr)
    held = int(said[1]) if said else 0
    assert receiver["received"] == 2048 - sender["failed"] - held, (receiver, sender, stderr)


#: 8192 messages of 1000 bytes (24 + 1000 bytes, and 1024 per queued copy: 16 MiB,
#: more than the kernel may still take) fill btl/tcp's copy queue exactly: the LEAVE
#: behind them is not copied.
_QUEUE_FULL_OF_COMPLETED = """
FINALIZING, COPIES, SIZE = sys.argv[4], 8192, 1000
MCA.update(pmca_base_finalize_timeout=1, pmca_base_modex_timeout=30)
MCA.update(btl_tcp_send_queue_limit=copy_queue_limit(COPIES, SIZE))
with pmca.Session(mca=MCA, frameworks=["btl"], world=WORLD) as s:
    if RANK == 0:
        sent = fill_copy_queue(s, 1, COPIES, SIZE)
        queued = s._data_path().bml.queued_sends(1)
        out(sent=sent, copies=sum(q.completed for q in queued), queued=len(queued))
        left = time.monotonic()
        open(FINALIZING, "w").close()
    else:
        wait_for_file(FINALIZING, 120)
        time.sleep(4.0)  # nothing read from the start of rank 0's finalize to past its bound
        received, error = receive_numbered(s, 0, 5, SIZE, PeerFailed)
        out(received=received)
if RANK == 0:
    out(finalize=time.monotonic() - left)
"""


def test_a_leave_behind_completed_messages_only_is_given_up_within_the_bound(
    pmca_env, tmp_path: Path
) -> None:
    """Every send of rank 0 completed, 8192 of them in btl/tcp's full copy queue with
    the LEAVE behind them, not handed over: rank 0 drops what is still queued at its
    1 s bound and names it, the peer and the LEAVE; rank 1, reading later, gets
    exactly the rest (looking only at sends, rank 0 waited for rank 1's word until
    it woke up, and said nothing)."""
    finalizing = str(tmp_path / "finalizing")
    sender, receiver = pair(tmp_path, _QUEUE_FULL_OF_COMPLETED, "self,tcp", finalizing)
    assert sender["copies"] == sender["queued"] == 8192, sender  # the case under test
    assert sender["finalize"] < 1.0 + 2.5, sender  # the bound and a margin, not the 4 s stall
    stderr = sender["stderr"]
    assert "rank(s) 1 did not acknowledge that this rank left within 1 s" in stderr, stderr
    assert "this rank's LEAVE to rank(s) 1 was still queued behind data" in stderr, stderr
    said = re.search(r"(\d+) messages not delivered \(completed, still queued in a btl\)", stderr)
    assert said and 0 < int(said[1]) <= 8192, stderr  # what the socket had not taken yet
    assert receiver["received"] == sender["sent"] - int(said[1]), (receiver, sender, stderr)
    assert sender["returncode"] == 0 and receiver["returncode"] == 0, (sender, receiver)


#: Rank 1 leaves first, while rank 0 (not progressing) holds a full btl/tcp copy
#: queue to it: rank 1's LEAVE waits in rank 0's socket. Rank 0 then stops rank 1
#: (SIGSTOP, resumed 3 s later: it reads nothing from here to past rank 0's 1 s
#: bound), hears the LEAVE (its LEAVE_ACK, finding the queue full, waits behind it
#: uncopied), and finalizes. With argv[6] = "pending", one more isend, beyond the
#: queue's limit, is still pending at the bound.
_LEFT_FIRST_THEN_STOPPED = """
import signal, threading
FINALIZING, PENDING, COPIES, SIZE = sys.argv[4], sys.argv[5] == "pending", 2048, 16 * 1024
MCA.update(pmca_base_finalize_timeout=1, pmca_base_modex_timeout=30)
MCA.update(btl_tcp_send_queue_limit=copy_queue_limit(COPIES, SIZE))
with pmca.Session(mca=MCA, frameworks=["btl"], world=WORLD) as s:
    if RANK == 0:
        sent = fill_copy_queue(s, 1, COPIES, SIZE)
        if PENDING:
            late = s.p2p.isend(1, 5, sent.to_bytes(4, "little") + bytes(SIZE - 4))
            sent += 1
        queued = s._data_path().bml.queued_sends(1)
        out(sent=sent, copies=sum(q.completed for q in queued), queued=len(queued))
        open(FINALIZING + ".go", "w").close()
        wait_for_file(FINALIZING, 120)  # rank 1's LEAVE is in its socket
        peer = int(open(FINALIZING).read())
        os.kill(peer, signal.SIGSTOP)
        threading.Timer(3.0, os.kill, (peer, signal.SIGCONT)).start()
        try:
            deadline = time.monotonic() + 60
            while time.monotonic() < deadline:
                s.p2p.iprobe(1, 99)
        except PeerFinalized:
            pass
    else:
        wait_for_file(FINALIZING + ".go", 120)
        engine = s.p2p

        def say_when_the_leave_is_out():
            while 0 not in engine._said or 0 in engine._unhanded:
                time.sleep(1e-4)
            with open(FINALIZING + ".tmp", "w") as pid:
                pid.write(str(os.getpid()))
            os.rename(FINALIZING + ".tmp", FINALIZING)

        threading.Thread(target=say_when_the_leave_is_out, daemon=True).start()
if RANK == 0:
    out(late=f"{type(late.error).__name__}: {late.error}" if PENDING else None)
"""


@pytest.mark.parametrize("pending", ["pending", "completed"])
def test_a_peer_that_left_first_is_not_given_up_as_silent(
    pmca_env, tmp_path: Path, pending: str
) -> None:
    """Rank 0 finalizes after rank 1 left, its LEAVE_ACK behind 2048 completed 16 KiB
    messages in btl/tcp's copy queue, while rank 1 reads nothing past rank 0's 1 s
    bound. Rank 0 never told rank 1 it leaves, so it never names it as not
    acknowledging. With a send still pending at the bound, rank 0 fails it and
    names the completed messages it drops, and rank 1 gets exactly the rest; with
    every send completed, rank 0 waits for its LEAVE_ACK to go out and rank 1 gets
    every message. (Giving up a peer that was never told, rank 0 named it silent;
    saying the dropped messages only with a silent peer, it named none; settling
    with the LEAVE_ACK still queued, it closed with the queue and lost it.)"""
    finalizing = str(tmp_path / "finalizing")
    sender, receiver = pair(tmp_path, _LEFT_FIRST_THEN_STOPPED, "self,tcp", finalizing, pending)
    assert sender["copies"] == 2048 and sender["queued"] > 2048 - 1, sender  # the case
    stderr = sender["stderr"]
    assert "did not acknowledge" not in stderr, stderr
    said = re.search(r"(\d+) messages? not delivered \(completed, still queued in a btl\)", stderr)
    held = int(said[1]) if said else 0
    if pending == "pending":
        assert sender["late"] == _GIVEN_UP, sender
        assert "1 send not delivered (not delivered within 1 s" in stderr, stderr
        assert 0 < held <= 2048, stderr
    else:
        assert "not delivered" not in stderr, stderr
    arrived = sender["sent"] - (pending == "pending") - held
    unreceived = f"from rank 0 tag 5: {arrived} messages, {arrived * 16384} bytes"
    assert unreceived in receiver["stderr"], (arrived, receiver["stderr"], stderr)
    assert sender["returncode"] == 0 and receiver["returncode"] == 0, (sender, receiver)


#: Rank 0 finalizes with a full btl/tcp copy queue to rank 1, which received 64
#: messages first (from what its socket held): rank 0's LEAVE waits uncopied, and
#: its finalize then moves some of the queue to the socket. Rank 1 leaves next and
#: stops itself once its LEAVE is in its socket (SIGSTOP, resumed 3 s later): rank
#: 0's LEAVE_ACK, with room in the queue by then, is copied at once, its LEAVE
#: still queued behind data past its 1 s bound.
_LEAVE_QUEUED_BEHIND_A_COPIED_ACK = """
import signal, subprocess, threading
FINALIZING, COPIES, SIZE, READ = sys.argv[4], 2048, 16 * 1024, 64
MCA.update(pmca_base_finalize_timeout=1, pmca_base_modex_timeout=30)
MCA.update(btl_tcp_send_queue_limit=copy_queue_limit(COPIES, SIZE))
with pmca.Session(mca=MCA, frameworks=["btl"], world=WORLD) as s:
    if RANK == 0:
        sent = fill_copy_queue(s, 1, COPIES, SIZE)
        open(FINALIZING + ".filled", "w").close()
        wait_for_file(FINALIZING + ".room", 120)
        open(FINALIZING, "w").close()
    else:
        wait_for_file(FINALIZING + ".filled", 120)
        for _ in range(READ):
            s.p2p.recv(0, 5, bytearray(SIZE), timeout=60)
        open(FINALIZING + ".room", "w").close()
        wait_for_file(FINALIZING, 120)
        time.sleep(0.3)  # rank 0 said its LEAVE and moved what the socket took
        engine = s.p2p
        subprocess.Popen(["sh", "-c", f"sleep 3; kill -CONT {os.getpid()}"])
        sys.setswitchinterval(1e-4)

        def stop_after_the_leave():
            while 0 not in engine._said or 0 in engine._unhanded:  # in the socket then
                time.sleep(1e-4)
            os.kill(os.getpid(), signal.SIGSTOP)

        threading.Thread(target=stop_after_the_leave, daemon=True).start()
if RANK == 0:
    out(sent=sent)
"""


def test_a_leave_queued_behind_a_copied_leave_ack_is_still_waited_for(
    pmca_env, tmp_path: Path
) -> None:
    """Both ranks finalize; rank 0's LEAVE waits uncopied in btl/tcp's queue behind
    completed messages, and its LEAVE_ACK to rank 1, copied behind it, counts as
    handed over at once, while rank 1 reads nothing past rank 0's 1 s bound. Rank 0
    still counts its LEAVE as queued: at the bound it gives rank 1 up, naming it,
    its LEAVE and the messages dropped, and rank 1 gets exactly the rest. (Counting
    one message per peer, the LEAVE_ACK's hand-over took the LEAVE off: rank 0 ended
    its drain at once and waited for rank 1 past its bound, silently.)"""
    finalizing = str(tmp_path / "finalizing")
    sender, receiver = pair(tmp_path, _LEAVE_QUEUED_BEHIND_A_COPIED_ACK, "self,tcp", finalizing)
    stderr = sender["stderr"]
    silent = "rank(s) 1 did not acknowledge that this rank left within 1 s"
    assert silent in stderr, stderr
    assert "this rank's LEAVE to rank(s) 1 was still queued behind data" in stderr, stderr
    said = re.search(r"(\d+) messages? not delivered \(completed, still queued in a btl\)", stderr)
    assert said and int(said[1]) > 0, stderr
    # What was dropped never arrives (closing, rank 0 may lose some of the rest too).
    unreceived = re.search(r"from rank 0 tag 5: (\d+) messages?", receiver["stderr"])
    arrived = int(unreceived[1]) if unreceived else 0
    assert arrived <= sender["sent"] - 64 - int(said[1]), (receiver["stderr"], stderr)
    assert sender["returncode"] == 0 and receiver["returncode"] == 0, (sender, receiver)
