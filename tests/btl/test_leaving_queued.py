"""Finalize delivers what btl/tcp still queues when it starts.

Completed sends need not have left the process: btl/tcp copies what the
peer's socket does not take into its own queue (up to
``btl_tcp_send_queue_limit``). Here the receiver reads nothing until the
sender is finalizing, and the sender's data is more than the kernel's
socket buffers hold, so its finalize starts with messages in btl/tcp's
queue (the test checks it did); every one must arrive, in order. A finalize
that dropped that queue, or stopped waiting for it, lost the rest.
"""

from __future__ import annotations

from ._pairs import pair

_QUEUED_AT_FINALIZE = """
from pmca.p2p import wait_all
# 32 MiB: more than loopback's socket buffers hold (a few MiB each way)
COUNT, SIZE = 2048, 16 * 1024
MCA.update(btl_tcp_send_queue_limit="64M", btl_tcp_if_include="127.0.0.1/8")
with pmca.Session(mca=MCA, frameworks=["btl"], world=WORLD) as s:
    if RANK == 0:
        sends = [s.p2p.isend(1, 5, i.to_bytes(4, "little") + bytes(SIZE - 4)) for i in range(COUNT)]
        wait_all(sends, timeout=60)  # each one copied by btl/tcp or taken by the kernel
        queued = s._data_path().bml.queued_sends(1)
        out(queued=sum(q.completed for q in queued))
        WORLD.barrier(timeout=60)
    else:
        WORLD.barrier(timeout=60)
        time.sleep(0.5)  # rank 0 is finalizing by now, its queue still full
        received, error = receive_numbered(s, 0, 5, SIZE, PeerFinalized)
        out(received=received, error=str(error))
"""


def test_messages_queued_in_btl_tcp_at_finalize_all_arrive(pmca_env, tmp_path) -> None:
    sender, receiver = pair(tmp_path, _QUEUED_AT_FINALIZE, "self,tcp", timeout=120)
    assert sender["returncode"] == 0 and receiver["returncode"] == 0, (sender, receiver)
    assert sender["queued"] > 0, sender  # the case under test: finalize began with a queue
    assert receiver["received"] == 2048, (receiver, sender["stderr"])
    assert "rank 0 finalized its session" in receiver["error"], receiver
    for side in (sender, receiver):  # nothing went wrong: finalize says nothing
        assert "not delivered" not in side["stderr"], side["stderr"]
        assert "did not acknowledge" not in side["stderr"], side["stderr"]
