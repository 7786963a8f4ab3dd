"""What a btl drops when finalize gives up on a peer never reaches that peer.

Finalize fails the sends it could not deliver within its bound and counts
the completed messages a btl still queued as not delivered; each btl's
``drop_queued`` takes those off its queue at that moment. Here rank 0 fills
its btl's queue to rank 1, which reads nothing, drops it, keeps progressing
while rank 1 reads everything it can, and rank 1 gets exactly the messages
that were not dropped, in order, and nothing after them. Before, btl tcp
kept writing a queue p2p had already given up, and the peer received
messages its sender had reported not delivered.
"""

from __future__ import annotations

import pytest

from ._pairs import BTLS as _BTLS
from ._pairs import pair as _pair

_DROP = """
import os
COUNT, SIZE, MARKER = int(sys.argv[4]), int(sys.argv[5]), sys.argv[6]
MCA.update(pmca_base_finalize_timeout=1, btl_tcp_send_queue_limit=1 << 20)
try:
    with pmca.Session(mca=MCA, frameworks=["btl"], world=WORLD) as s:
        if RANK == 0:
            bml = s._data_path().bml
            requests = [
                s.p2p.isend(1, 5, i.to_bytes(4, "little") + bytes(SIZE - 4)) for i in range(COUNT)
            ]
            for _ in range(100):
                s.p2p.progress()
            dropped = []
            with bml.lock:
                for module in bml.modules:
                    dropped += module.drop_queued(1)
            failed = [r for r in requests if r.done and r.error is not None]
            reasons = {str(r.error) for r in failed}
            open(MARKER, "w").close()  # rank 1 reads now, while this rank progresses
            deadline = time.monotonic() + 6.0
            while time.monotonic() < deadline:
                s.p2p.progress()
                time.sleep(0.001)
            out(
                dropped=len(dropped),
                dropped_completed=sum(q.completed for q in dropped),
                failed=len(failed),
                pending=sum(not r.done for r in requests),
                reasons=sorted(reasons),
            )
            raise RuntimeError("leave at once: rank 1 may wait on what was dropped")
        else:
            while not os.path.exists(MARKER):
                time.sleep(0.02)
            received, error = receive_numbered(s, 0, 5, SIZE, (PeerFailed, PeerFinalized))
            out(received=received, ended=type(error).__name__)
except RuntimeError:
    pass
"""


#: (btl, messages, bytes each): more than the transport takes while nobody reads
#: (loopback socket buffers grow to a few MiB), in eager messages only.
_CASES = [("self,tcp", 20_000, 1024), ("self,tcp", 600, 48 * 1024)] + [
    (btl, 20_000, 1024) for btl in _BTLS if btl != "self,tcp"
]


@pytest.mark.parametrize(("btl", "count", "size"), _CASES)
def test_messages_a_btl_dropped_never_reach_the_peer(pmca_env, tmp_path, btl, count, size) -> None:
    """Isends to a rank that reads nothing yet; then rank 0's btls drop what they queue.

    Every send still pending fails with the btl's "dropped unsent" error (none
    is left pending), and rank 1, reading afterwards while rank 0 keeps
    progressing, gets exactly ``count - dropped`` messages, in order: all that
    the transport took (kernel socket buffer, sm FIFO) and nothing dropped.
    With 48 KiB messages btl tcp's first queued frame is usually cut by the
    socket: it is dropped too, and the connection's writes end there.
    """
    marker = str(tmp_path / "read")
    sender, receiver = _pair(tmp_path, _DROP, btl, str(count), str(size), marker, timeout=300)
    assert sender["dropped"] > 0, sender  # the queue held something to drop
    assert sender["pending"] == 0, sender
    assert sender["failed"] == sender["dropped"] - sender["dropped_completed"], sender
    for reason in sender["reasons"]:
        assert "dropped unsent" in reason and "rank 1" in reason, sender
    assert receiver.get("received") == count - sender["dropped"], (receiver, sender)
    assert sender["returncode"] == 0 and receiver["returncode"] == 0, (sender, receiver)
