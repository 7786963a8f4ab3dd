"""btl/tcp's listener during init: strangers delay no rank, half-open connections are
capped, and running out of descriptors is an error naming the limit."""

from __future__ import annotations

import errno
import json
import os
import re
import shutil
import socket
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any

import pytest

import pmca
from pmca.testing import run_python

from ._tcp_peer import hello_from, pretend_peer

SIDE = str(Path(__file__).with_name("_tcp_listener_side.py"))
#: A modex timeout well above the 1 s bound, so that a listener which waits on a
#: stranger for the rest of it cannot pass for one that does not.
PAIR_MCA = {
    "btl": "self,tcp",
    "btl_tcp_if_include": "127.0.0.1/8",
    "pmca_base_modex_timeout": 20,
}
MCA = {**PAIR_MCA, "pmca_base_modex_timeout": 60, "btl_base_verbose": 40}


def _pair(
    what: tuple[str, str],
    *,
    needed: tuple[int, ...] = (0, 1),
    env: dict[int, dict[str, str]] | None = None,
) -> dict[int, Any]:
    """Run the two ranks of ``_tcp_listener_side.py``; their reports, by rank.

    Only the ranks in ``needed`` are waited for; the other is then killed.
    ``env``: variables added to a rank's environment.
    """
    ends = socket.socketpair()
    children = {}
    for rank, end in enumerate(ends):
        argv = [sys.executable, SIDE, "pair", str(end.fileno()), str(rank), json.dumps(PAIR_MCA)]
        children[rank] = subprocess.Popen(
            [*argv, what[rank]],
            pass_fds=[end.fileno()],
            env={**os.environ, **(env or {}).get(rank, {})},
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
    for end in ends:
        end.close()
    reports: dict[int, Any] = {}
    try:
        for rank in needed:
            out, err = children[rank].communicate(timeout=180)
            assert children[rank].returncode == 0, f"rank {rank}:\n{out}\n{err}"
            reports[rank] = json.loads(out.strip().splitlines()[-1])
    finally:
        for child in children.values():
            if child.poll() is None:
                child.kill()
            child.communicate()
    return reports


def _init_times(what: str) -> list[float]:
    reports = _pair((what, what))
    for report in reports.values():
        assert "error" not in report, report
        assert report["intact"], report
    return [reports[0]["init"], reports[1]["init"]]


@pytest.mark.parametrize("stranger", ["silent", "short"])
def test_a_stranger_on_every_listener_delays_no_rank(pmca_env, stranger: str) -> None:
    """A stranger that connects to each listener before the peer and sends nothing (or 5
    bytes of a hello): init takes as long as without it (within 1 s), for both ranks, and
    both finalize. The fastest of two runs of each is compared."""
    plain = [_init_times("none") for _ in range(2)]
    disturbed = [_init_times(stranger) for _ in range(2)]
    for rank in (0, 1):
        without = min(run[rank] for run in plain)
        with_stranger = min(run[rank] for run in disturbed)
        assert with_stranger <= without + 1.0, (rank, plain, disturbed)


def _waiting_for_rank_1(session: pmca.Session) -> tuple[Any, bytes, threading.Thread, dict]:
    """A tcp module waiting in add_procs (in a thread) for a pretend rank 1."""
    tcp, procs, nonce = pretend_peer(session)
    result: dict[str, Any] = {}

    def add() -> None:
        try:
            result["endpoints"] = tcp.add_procs(procs)
        except BaseException as exc:
            result["error"] = exc

    thread = threading.Thread(target=add, daemon=True)
    thread.start()
    return tcp, nonce, thread, result


def _closed_by_listener(sock: socket.socket) -> bool:
    """Whether the listener closed ``sock`` (waits for it, generously, but for less than
    the modex timeout: the old listener dropped a stranger only when that ran out)."""
    sock.settimeout(30)
    try:
        return sock.recv(1) == b""
    except ConnectionResetError:
        return True


def _still_open(sock: socket.socket) -> bool:
    try:
        sock.recv(1, socket.MSG_DONTWAIT)
    except BlockingIOError:
        return True
    return False


def test_a_silent_stranger_is_dropped_after_the_hello_timeout(pmca_env, capfd) -> None:
    mca = {**MCA, "btl_tcp_hello_timeout": 0.5}
    with pmca.Session(mca=mca, frameworks=["btl"]) as s:
        tcp, nonce, thread, result = _waiting_for_rank_1(s)
        stranger = socket.create_connection(("127.0.0.1", tcp.port))
        # Dropped while add_procs still waits for rank 1 (the old listener read the
        # stranger for the rest of the 60 s modex timeout, taking no other connection).
        assert _closed_by_listener(stranger)
        assert thread.is_alive() and not result
        genuine = hello_from("127.0.0.1", tcp.port, nonce)
        thread.join(60)
        assert "error" not in result, result
        assert result["endpoints"][1] is not None
        tcp.del_procs([result["endpoints"][1]])
        genuine.close()
        stranger.close()
    err = capfd.readouterr().err
    dropped = [line for line in err.splitlines() if "dropped a connection" in line]
    assert len(dropped) == 1, err
    assert "btl_tcp_hello_timeout" in dropped[0] and "0 of 16 bytes" in dropped[0]
    assert "source='127.0.0.1'" in dropped[0] and "interface='lo'" in dropped[0]


def test_at_most_half_open_max_connections_wait_for_their_hello(pmca_env, capfd) -> None:
    mca = {**MCA, "btl_tcp_hello_timeout": 120, "btl_tcp_half_open_max": 4}
    with pmca.Session(mca=mca, frameworks=["btl"]) as s:
        tcp, nonce, thread, result = _waiting_for_rank_1(s)
        strangers = [socket.create_connection(("127.0.0.1", tcp.port)) for _ in range(10)]
        # The 6 oldest make room for newer ones, one by one; the 4 newest wait.
        assert all(_closed_by_listener(stranger) for stranger in strangers[:6])
        assert all(_still_open(stranger) for stranger in strangers[6:])
        genuine = hello_from("127.0.0.1", tcp.port, nonce)
        thread.join(60)
        assert "error" not in result, result
        assert result["endpoints"][1] is not None
        # Init is over: what still waits for its hello is closed.
        assert all(_closed_by_listener(stranger) for stranger in strangers[6:])
        tcp.del_procs([result["endpoints"][1]])
        genuine.close()
        for stranger in strangers:
            stranger.close()
    err = capfd.readouterr().err
    capped = [line for line in err.splitlines() if "(btl_tcp_half_open_max)" in line]
    assert len(capped) == 1 and "dropped a connection" in capped[0], err
    # 6 dropped, one logged; a 7th when rank 1's connection is accepted before its hello
    # arrives (it then waits as the others do, and the oldest makes room).
    counted = re.search(r"'127\.0\.0\.1: btl_tcp_half_open_max': (\d+)", err)
    assert counted is not None and int(counted.group(1)) in (5, 6), err


@pytest.mark.parametrize(
    ("exhausted", "call"), [(0, "accept a connection"), (1, "connect to rank 0")]
)
def test_running_out_of_descriptors_names_the_limit(pmca_env, exhausted: int, call: str) -> None:
    """Rank 1 connects, rank 0 accepts: with every descriptor taken (RLIMIT_NOFILE
    lowered) after the modex, the exhausted rank's init raises a BtlError naming the
    btl, itself, the peer and its address, and the limit's soft and hard values."""
    what = ("exhaust", "none") if exhausted == 0 else ("none", "exhaust")
    report = _pair(what, needed=(exhausted,))[exhausted]
    assert report.get("error"), report
    message = report["message"]
    assert report["btl_error"] and report["error"] != "OSError", report
    soft, hard = report["limits"]["soft"], report["limits"]["hard"]
    assert f"btl tcp: rank {exhausted} cannot {call}" in message, message
    assert "127.0.0.1" in message and f"rank {1 - exhausted}" in message, message
    assert "(EMFILE)" in message and "RLIMIT_NOFILE" in message, message
    assert f"soft {soft}, hard {hard}" in message and "ulimit -n" in message, message


@pytest.fixture(scope="module")
def socket_faults(tmp_path_factory: pytest.TempPathFactory) -> str:
    """``_socket_faults.c`` built into a shared library, for LD_PRELOAD."""
    compiler = os.environ.get("CC") or shutil.which("gcc") or shutil.which("cc")
    if compiler is None:
        pytest.skip("no C compiler to build the socket fault injection with")
    library = tmp_path_factory.mktemp("faults") / "libsocket_faults.so"
    source = Path(__file__).with_name("_socket_faults.c")
    subprocess.run(
        [compiler, "-shared", "-fPIC", "-O2", "-o", str(library), str(source), "-ldl"],
        check=True,
        timeout=120,
    )
    return str(library)


#: What each kind of exhaustion must name besides rank, peer and address.
_CAUSES = {
    errno.ENFILE: ("Too many open files in system (ENFILE)", "fs.file-max"),
    errno.ENOBUFS: ("No buffer space available (ENOBUFS)", "net.ipv4.tcp_mem"),
    errno.ENOMEM: ("Cannot allocate memory (ENOMEM)", "memory cgroup"),
}


@pytest.mark.parametrize("code", sorted(_CAUSES), ids=lambda code: errno.errorcode[code])
@pytest.mark.parametrize(
    ("failing", "call", "doing"),
    [
        (0, "accept4", "accept a connection"),
        (1, "socket", "connect to rank 0"),
        (1, "connect", "connect to rank 0"),
    ],
)
def test_a_socket_call_out_of_resources_names_the_cause(
    pmca_env, socket_faults: str, failing: int, call: str, doing: str, code: int
) -> None:
    """After the modex, one rank's ``accept4``, ``socket`` or ``connect`` fails with
    ENFILE, ENOBUFS or ENOMEM (the libc call itself, interposed): its init raises a
    BtlError naming the btl, the rank, the peer, the address and the cause with the
    limit behind it, not a bare OSError."""
    what = ["none", "none"]
    what[failing] = f"fault:{call}:{code}"
    report = _pair(
        (what[0], what[1]),
        needed=(failing,),
        env={failing: {"LD_PRELOAD": socket_faults}},
    )[failing]
    assert report.get("error"), report
    assert report["btl_error"] and report["error"] != "OSError", report
    message = report["message"]
    assert f"btl tcp: rank {failing} cannot {doing}" in message, message
    assert "127.0.0.1" in message and f"rank {1 - failing}" in message, message
    cause, limit = _CAUSES[code]
    assert cause in message and limit in message, message


_EVICTION = """
import os, resource, socket, sys, threading, time
sys.path.insert(0, {here!r})
import pmca
from _tcp_peer import pretend_peer
from pmca.btl.tcp import _wire as wire

def descriptors():
    return len(os.listdir("/proc/self/fd"))

mca = {mca!r}
with pmca.Session(mca=mca, frameworks=["btl"]) as s:
    tcp, procs, nonce = pretend_peer(s)
    result = {{}}
    thread = threading.Thread(target=lambda: result.update(endpoints=tcp.add_procs(procs)))
    thread.start()
    stranger = socket.socket()
    genuine = socket.socket()  # made now: no descriptor is left for it later
    before = descriptors()
    stranger.connect(("127.0.0.1", tcp.port))
    deadline = time.monotonic() + 60
    while descriptors() == before:  # until the listener holds the stranger
        assert time.monotonic() < deadline, "the stranger was never accepted"
        time.sleep(0.01)
    highest = max(int(name) for name in os.listdir("/proc/self/fd"))
    hard = resource.getrlimit(resource.RLIMIT_NOFILE)[1]
    resource.setrlimit(resource.RLIMIT_NOFILE, (highest + 1, hard))
    taken = []
    while True:
        try:
            taken.append(os.open(os.devnull, os.O_RDONLY))
        except OSError:
            break
    genuine.connect(("127.0.0.1", tcp.port))
    genuine.sendall(wire.HELLO.pack(wire.HELLO_MAGIC, 1, nonce))
    thread.join(60)
    stranger.settimeout(30)
    closed = stranger.recv(1) == b""
    print("endpoint", result["endpoints"][1] is not None, "stranger closed", closed)
    for fd in taken:
        os.close(fd)
    tcp.del_procs([result["endpoints"][1]])
"""


def test_out_of_descriptors_a_stranger_makes_room_for_a_rank(pmca_env) -> None:
    """Every descriptor taken while a stranger waits for its hello: the rank's connection
    is accepted in its place instead of failing init."""
    mca = {**MCA, "btl_tcp_hello_timeout": 120}
    code = _EVICTION.format(here=str(Path(__file__).parent), mca=mca)
    done = run_python(code, timeout=180)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "endpoint True stranger closed True" in done.stdout, done.stdout + done.stderr
    assert "its descriptor is needed" in done.stderr and "Too many open files" in done.stderr


_ADOPTION_FAILS = """
import ctypes, os, resource, socket, sys, traceback, warnings
warnings.simplefilter("always", ResourceWarning)
import pmca
from pmca.btl import Proc
from pmca.btl.base import host_id
from pmca.btl.tcp import _wire as wire

def descriptors():
    return {{int(name) for name in os.listdir("/proc/self/fd")}}

def private_data():
    with open("/proc/self/status") as f:
        return next(int(line.split()[1]) << 10 for line in f if line.startswith("VmData:"))

mca = {mca!r}
with pmca.Session(mca=mca, frameworks=["btl"]) as s:
    (tcp,) = (m for m in s.modules("btl") if m.name == "tcp")
    here = host_id()
    elsewhere = wire.pack_address(
        wire.TcpAddress(bytes(8), (wire.Listening("127.0.0.1", 8, 9),))
    )
    procs = [Proc(0, here, os.getpid(), tcp.address(), local=True)]
    procs += [Proc(rank, here, 2, elsewhere) for rank in (1, 2, 3)]
    # Ranks 1 to 3 connect and say hello before rank 0 listens: one batch.
    peers = []
    for rank in (1, 2, 3):
        peer = socket.create_connection(("127.0.0.1", tcp.port))
        peer.sendall(wire.HELLO.pack(wire.HELLO_MAGIC, rank, tcp.group.nonce))
        peers.append(peer)
    before = descriptors()
    # Room in Python's small-object arenas (every other object freed), so that
    # nothing before the read buffer needs a new arena under the limit.
    room = [str(i) * (i % 60) for i in range(100_000)]
    del room[::2]
    # Blocks of 1 MiB always mapped afresh (never from room the heap kept), and
    # hardly any data segment left (RLIMIT_DATA, which also bounds the room malloc
    # would take in another thread's arena): a connection's 1 MiB read buffer
    # cannot be had.
    ctypes.CDLL(None).mallopt(-3, 128 << 10)  # M_MMAP_THRESHOLD
    soft, hard = resource.getrlimit(resource.RLIMIT_DATA)
    resource.setrlimit(resource.RLIMIT_DATA, (private_data() + (512 << 10), hard))
    try:
        tcp.add_procs(procs)
    except MemoryError as exc:
        resource.setrlimit(resource.RLIMIT_DATA, (soft, hard))
        failed = exc
    else:
        raise SystemExit("add_procs did not run out of memory")
    # Counted while the error is held, as a caller handling it holds it.
    frames = [frame.name for frame in traceback.extract_tb(failed.__traceback__)]
    print("adopting", "_adopt" in frames, frames)
    print("left open", len(descriptors() - before))
    closed = []
    for peer in peers:
        peer.settimeout(5)
        try:
            closed.append(peer.recv(1) == b"")
        except TimeoutError:
            closed.append(False)
    print("closed", closed, flush=True)
    del failed
    for peer in peers:
        peer.close()
"""


def test_a_failed_adoption_closes_every_connection_of_its_batch(pmca_env) -> None:
    """Three ranks' connections accepted in one batch, and adopting the first runs out
    of memory (a lowered RLIMIT_DATA): all three are closed when add_procs raises, while
    the error is still held, not when the garbage collector finds them."""
    code = _ADOPTION_FAILS.format(mca=MCA)
    done = run_python(code, timeout=180)
    output = done.stdout + done.stderr
    assert done.returncode == 0, output
    assert "adopting True" in done.stdout, output
    assert "left open 0" in done.stdout, output
    assert "closed [True, True, True]" in done.stdout, output
    assert "unclosed" not in done.stderr, output
