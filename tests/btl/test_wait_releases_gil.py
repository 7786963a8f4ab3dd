"""A blocking receive over tcp polls its sockets in C with the GIL released.

Another thread of the rank (a tool reading pvars every millisecond) then
takes the GIL at once while the rank waits, instead of being woken at
every short system call of a Python polling loop to find it taken again.
"""

from __future__ import annotations

import json
import textwrap

import pytest

from pmca.btl.bml._spin import spinner
from pmca.testing import run_pair

pytestmark = pytest.mark.skipif(spinner() is None, reason="libpmca_bml_spin.so is not built")

#: Samples the other thread takes of what the waiting thread runs.
SAMPLES = 60

_SOURCE = textwrap.dedent(
    """
    import json, socket, sys, threading, time
    import pmca
    from pmca.world import PairWorld

    SAMPLES = {samples}

    def run(fd, rank):
        world = PairWorld(socket.socket(fileno=fd), rank)
        # spinning for the whole wait (it then sleeps in select(), GIL released too)
        mca = {{"btl": "self,tcp", "btl_base_wait_spin": 60, "pmca_base_modex_timeout": 60}}
        with pmca.Session(mca=mca, frameworks=["btl"], world=world) as s:
            buffer = bytearray(8)
            if rank == 1:
                s.p2p.recv(0, 2, buffer)  # go: rank 0 sampled its wait
                s.p2p.send(0, 1, b"8 bytes!")
                return None
            waiting = threading.get_ident()
            where = []

            def sample():
                time.sleep(0.05)  # the receive below is waiting by now
                while len(where) < SAMPLES:
                    time.sleep(0.001)
                    frame = sys._current_frames()[waiting]
                    where.append(f"{{frame.f_code.co_filename}}:{{frame.f_code.co_name}}")
                s.p2p.send(1, 2, b"go......")

            sampler = threading.Thread(target=sample)
            sampler.start()
            s.p2p.recv(1, 1, buffer)
            sampler.join()
            return {{"where": where, "received": bytes(buffer).decode()}}

    if __name__ == "__main__":
        print(json.dumps(run(int(sys.argv[1]), 1)), flush=True)
    """
)


def test_a_waiting_receive_holds_no_gil_while_it_polls_tcp(pmca_env, tmp_path) -> None:
    result, _ = run_pair(_SOURCE.format(samples=SAMPLES), tmp_path)
    assert result["received"] == "8 bytes!"
    where = result["where"]
    native = [w for w in where if w.endswith("_spin.py:ready")]
    # Old code polled from Python: no sample found the wait inside a native poll.
    assert len(native) >= len(where) // 2, json.dumps(where, indent=1)


def test_the_spinner_returns_when_a_descriptor_has_input_and_not_before() -> None:
    import socket
    import threading

    native = spinner()
    assert native is not None
    quiet, other = socket.socketpair()
    pairs = [socket.socketpair() for _ in range(70)]  # more than the C stack's 64
    try:
        fds = [quiet.fileno()] + [a.fileno() for a, _ in pairs]
        assert native.spin(fds, 0.002, False) is False  # nothing came: the slice ran out
        assert native.spin(fds, 0.002, True) is False
        pairs[-1][1].send(b"x")  # the last descriptor, beyond the stack's
        assert native.spin(fds, 60.0, False) is True
        pairs[-1][0].recv(1)
        # input arriving while it polls (from another thread: the GIL is free)
        threading.Timer(0.05, other.send, args=(b"y",)).start()
        assert native.spin([quiet.fileno()], 60.0, False) is True
        assert quiet.recv(1) == b"y"
    finally:
        for a, b in [(quiet, other), *pairs]:
            a.close()
            b.close()


def test_the_spinner_names_the_descriptors_it_found_ready() -> None:
    """What the wait's next progress reads without polling again: exactly the
    descriptors with input, or ``None`` (look for yourself) beyond the 62 it names."""
    import socket

    native = spinner()
    assert native is not None
    pairs = [socket.socketpair() for _ in range(70)]
    try:
        fds = [a.fileno() for a, _ in pairs]
        assert native.ready(fds, 0.002, False) == []  # the slice ran out
        pairs[3][1].send(b"x")
        pairs[61][1].send(b"x")
        assert native.ready(fds, 60.0, False) == [fds[3], fds[61]]
        pairs[3][0].recv(1)
        assert native.ready(fds, 60.0, True) == [fds[61]]
        pairs[62][1].send(b"x")  # the 63rd: not named, the caller must look itself
        assert native.ready(fds, 60.0, False) is None
        assert native.spin(fds, 60.0, False) is True
        pairs[61][0].recv(1)
        pairs[62][0].recv(1)
        pairs[0][1].close()  # a hang-up is input too (a read says so)
        assert native.ready(fds, 60.0, False) == [fds[0]]
    finally:
        for a, b in pairs:
            a.close()
            b.close()
