"""Two real processes joined by a socket pair (a :class:`pmca.world.PairWorld`).

The body of a test's program runs as rank 0 and rank 1 after a prelude that
opens the world (``WORLD``, ``RANK``, ``MCA`` with the btl list the test
chose) and defines ``out(**facts)``, which prints one JSON line the test reads.
"""

from __future__ import annotations

import json
import socket
import subprocess
import sys
import textwrap
from pathlib import Path

from pmca.btl import FRAMEWORK

HAS_SM = any(ref.name == "sm" for ref in FRAMEWORK.static_components)
#: The btl sets a pair of processes on one host is tested over.
BTLS = ["self,tcp"] + (["self,sm"] if HAS_SM else [])

PRELUDE = textwrap.dedent(
    """
    import json, os, socket, sys, time
    import pmca
    from pmca.btl import PeerFailed, PeerFinalized
    from pmca.world import PairWorld

    FD, RANK, BTL = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3]
    WORLD = PairWorld(socket.socket(fileno=FD), RANK)
    MCA = {"btl": BTL}

    def out(**facts):
        print(json.dumps(facts), flush=True)

    def wait_for_file(path, seconds):
        # Until another process created path (at most seconds), without progressing.
        deadline = time.monotonic() + seconds
        while not os.path.exists(path) and time.monotonic() < deadline:
            time.sleep(0.01)

    def outcomes_of(sends):
        # Each send waited for: "sent", or the name of what it raised.
        outcomes = []
        for send in sends:
            try:
                send.wait(timeout=60)
                outcomes.append("sent")
            except Exception as exc:
                outcomes.append(type(exc).__name__)
        return outcomes

    def receive_numbered(s, source, tag, size, ends):
        # Messages numbered 0, 1, ... (4 bytes first) from source, in order, until
        # one of ends is raised: how many, and that error.
        buffer = bytearray(size)
        received = 0
        try:
            while True:
                s.p2p.recv(source, tag, buffer, timeout=60)
                assert int.from_bytes(buffer[:4], "little") == received, received
                received += 1
        except ends as exc:
            return received, exc

    def copy_queue_limit(copies, size):
        # A btl_tcp_send_queue_limit that holds exactly copies messages of size bytes.
        from pmca.btl.tcp._connection import QUEUED_COST
        from pmca.p2p._protocol import MATCH
        return copies * (MATCH.size + size + QUEUED_COST)

    def fill_copy_queue(s, peer, copies, size):
        # Numbered isends to peer (4 bytes first), which does not read: as many as
        # its socket takes, then copies more, which btl/tcp copies into its queue
        # (full then, with copy_queue_limit(copies, size)). How many were sent.
        bml, sent = s._data_path().bml, 0

        def send_next():
            nonlocal sent
            s.p2p.isend(peer, 5, sent.to_bytes(4, "little") + bytes(size - 4))
            sent += 1

        while not bml.queued_sends(peer) and sent < 100_000:  # the socket takes what it can
            send_next()
        for _ in range(copies - len(bml.queued_sends(peer))):  # then btl/tcp copies each
            send_next()
        return sent
    """
)


def pair(tmp_path: Path, body: str, btl: str, *args: str, timeout: float = 240.0) -> list[dict]:
    """Run ``body`` as rank 0 and rank 1; each one's JSON lines merged, and its stderr."""
    script = tmp_path / "rank.py"
    script.write_text(PRELUDE + textwrap.dedent(body))
    ends = socket.socketpair()
    children = [
        subprocess.Popen(
            [sys.executable, str(script), str(end.fileno()), str(rank), btl, *args],
            pass_fds=[end.fileno()],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for rank, end in enumerate(ends)
    ]
    for end in ends:
        end.close()
    results = []
    for rank, (returncode, stdout, stderr) in enumerate(_outputs(children, timeout)):
        facts: dict = {"rank": rank, "returncode": returncode, "stderr": stderr}
        for line in stdout.splitlines():
            if line.startswith("{"):
                facts.update(json.loads(line))
        results.append(facts)
    return results


def _outputs(children: list[subprocess.Popen], timeout: float) -> list[tuple[int, str, str]]:
    """Each child's (returncode, stdout, stderr); all are killed when one outlasts ``timeout``."""
    results = []
    for child in children:
        try:
            stdout, stderr = child.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            for other in children:
                other.kill()
            raise
        results.append((child.returncode, stdout, stderr))
    return results


def run_ranks(
    script: Path, count: int, *args: str, timeout: float = 120.0
) -> list[tuple[int, str, str]]:
    """Run ``script RANK *args`` as ``count`` processes; each one's (returncode, stdout, stderr)."""
    command = [sys.executable, str(script)]
    ranks = [
        subprocess.Popen(
            [*command, str(rank), *args], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
        )
        for rank in range(count)
    ]
    return _outputs(ranks, timeout)


__all__ = ["BTLS", "HAS_SM", "PRELUDE", "pair", "run_ranks"]
