"""A peer's failure reaches every waiting request even when its log line cannot be written.

The "peer failed" line is written to stderr by default: with stderr closed,
a broken pipe or ``sys.stderr = None`` that write fails, and before pmca
contained it, the error escaped from the wait (``BrokenPipeError``,
``OSError``, ``AttributeError`` instead of ``PeerFailed``) and the receive
was never failed: a second wait hung forever.
"""

from __future__ import annotations

import subprocess
import sys
import textwrap

import pytest

_RANK0 = textwrap.dedent(
    """
    import os, signal, socket, subprocess, sys
    import pmca
    from pmca.btl import PeerFailed
    from pmca.world import PairWorld

    HOW, BTL = sys.argv[1], sys.argv[2]
    MCA = {"btl": BTL, "pmca_base_modex_timeout": 60}
    RANK1 = (
        "import socket, sys, time, pmca\\n"
        "from pmca.world import PairWorld\\n"
        "world = PairWorld(socket.socket(fileno=int(sys.argv[1])), 1)\\n"
        f"with pmca.Session(mca={MCA!r}, frameworks=['btl'], world=world) as s:\\n"
        "    s.p2p.send(0, 1, b'ready')\\n"
        "    time.sleep(600)\\n"
    )

    here, there = socket.socketpair()
    child = subprocess.Popen(
        [sys.executable, "-c", RANK1, str(there.fileno())], pass_fds=[there.fileno()]
    )
    there.close()
    with pmca.Session(mca=MCA, frameworks=["btl"], world=PairWorld(here, 0)) as s:
        buffer = bytearray(5)
        s.p2p.recv(1, 1, buffer, timeout=60)
        if HOW == "closed":
            os.close(2)
        elif HOW == "broken-pipe":
            reader, writer = os.pipe()
            os.close(reader)
            signal.signal(signal.SIGPIPE, signal.SIG_IGN)
            os.dup2(writer, 2)
        else:
            sys.stderr = None
        request = s.p2p.irecv(1, 2, bytearray(8))
        child.kill()
        child.wait()
        outcomes = []
        for timeout in (60, 20):  # the second wait must not hang either
            try:
                request.wait(timeout=timeout)
                outcomes.append("completed")
            except PeerFailed:
                outcomes.append("PeerFailed")
            except Exception as exc:
                outcomes.append(type(exc).__name__)
        print(" ".join(outcomes), flush=True)
        os._exit(0)  # the finalize barrier has no peer left to meet
    """
)


@pytest.mark.parametrize("btl", ["self,tcp", "self,sm"])
@pytest.mark.parametrize("how", ["closed", "broken-pipe", "none"])
def test_peer_failure_survives_an_unwritable_stderr(pmca_env, tmp_path, how, btl) -> None:
    script = tmp_path / "rank0.py"
    script.write_text(_RANK0)
    done = subprocess.run(
        [sys.executable, str(script), how, btl],
        capture_output=True,
        text=True,
        timeout=180,
    )
    assert done.stdout.split() == ["PeerFailed", "PeerFailed"], (done.stdout, done.stderr)
