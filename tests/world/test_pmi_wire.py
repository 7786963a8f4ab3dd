"""PMI-1 and PMI-2 over PMI_FD against a server written from the wire format.

The launcher's side is a socket this test holds (a thread of
:class:`FakePmiServer`); the client is the real one. When the server
misbehaves: clear errors naming the protocol and the command, never a hang.
"""

from __future__ import annotations

import hashlib
import json
import os
import socket
import subprocess
import sys
import threading
import time

import pytest

import pmca
from pmca.mca.params import ParamError
from pmca.world._job import job_identity
from pmca.world._pmi2 import frame, message_end, parse

from ._fake_pmi import FakePmiServer


@pytest.fixture
def serve(monkeypatch):
    """``serve(**options)``: a fake server for a job of 2; this process is rank 0."""
    servers = []

    def start(**options):
        server = FakePmiServer(2, **options)
        servers.append(server)
        monkeypatch.setenv("PMI_FD", str(server.client_fd(0)))
        monkeypatch.setenv("PMI_RANK", "0")
        monkeypatch.setenv("PMI_SIZE", "2")
        return server

    yield start
    for server in servers:
        server.close()


@pytest.mark.parametrize("version", ["auto", "1", "2"])
def test_closed_descriptor_is_named(monkeypatch, version):
    read_fd, write_fd = os.pipe()
    os.close(read_fd)
    os.close(write_fd)
    monkeypatch.setenv("PMI_FD", str(read_fd))
    monkeypatch.setenv("PMI_RANK", "0")
    monkeypatch.setenv("PMI_SIZE", "2")
    label = "PMI" if version == "auto" else f"PMI-{version}"
    with pytest.raises(
        pmca.world.LauncherError, match=rf"^{label}: PMI_FD={read_fd} is not an open"
    ):
        pmca.world.from_pmi(timeout=5, version=version)


def test_unknown_version_is_named(serve):
    serve()
    with pytest.raises(pmca.world.LauncherError, match=r"pmca_base_pmi_version='3'"):
        pmca.world.from_pmi(timeout=5, version="3")


@pytest.mark.parametrize(
    ("answer", "error"),
    [
        (b"", "the launcher closed PMI_FD=[0-9]+ before answering '{command}'"),
        (b"HTTP/1.1 400 Bad Request\n", "the answer to '{command}' is not {label}"),
    ],
    ids=["hangs-up", "garbage"],
)
@pytest.mark.parametrize(
    ("version", "command", "label"),
    [("auto", "init", "PMI"), ("1", "get_maxes", "PMI-1"), ("2", "fullinit", "PMI-2")],
)
def test_launcher_that_hangs_up_or_speaks_garbage(serve, answer, error, version, command, label):
    serve(answers={command: answer})
    expected = f"^{label}: " + error.format(command=command, label=label)
    with pytest.raises(pmca.world.LauncherError, match=expected):
        pmca.world.from_pmi(timeout=5, version=version)


@pytest.mark.parametrize(
    ("version", "command", "label"),
    [("auto", "init", "PMI"), ("1", "get_appnum", "PMI-1"), ("2", "job-getid", "PMI-2")],
)
def test_silent_launcher_times_out(serve, version, command, label):
    serve(answers={command: None})
    start = time.monotonic()
    with pytest.raises(pmca.world.WorldTimeout, match=rf"^{label}: no answer to '{command}'.*1 s"):
        pmca.world.from_pmi(timeout=1, version=version)
    assert time.monotonic() - start < 30  # bounded, not a hang (the bound itself is 1 s)


def test_launcher_that_stops_reading_ends_a_write_at_its_deadline(serve):
    """A put larger than the launcher's socket holds, to a launcher that reads no more.

    The descriptor is blocking (an MPI library may share it): before, the
    write blocked until the launcher read again, however long past the
    command's deadline. Now the command fails at its deadline, naming it.
    """
    maxes = b"cmd=maxes kvsname_max=256 keylen_max=64 vallen_max=1048576\n"
    server = serve(answers={"get_maxes": maxes})
    world = pmca.world.from_pmi(timeout=2, version="1")
    with socket.socket(fileno=os.dup(server.client_fd(0))) as end:
        end.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, 4096)  # holds a few KiB
    server.stop_reading()
    outcome: list[BaseException] = []

    def gather() -> None:
        try:
            world.allgather(bytes(512 * 1024))  # one put of some 700,000 characters
        except BaseException as exc:
            outcome.append(exc)

    thread = threading.Thread(target=gather, daemon=True)  # a blocked write stays there
    started = time.monotonic()
    thread.start()
    thread.join(2 + 10)  # the world's bound, and a margin for a loaded machine
    assert not thread.is_alive(), "the write passed its deadline, still blocked"
    assert time.monotonic() - started < 2 + 10
    assert len(outcome) == 1 and isinstance(outcome[0], pmca.world.LauncherError), outcome
    assert str(outcome[0]) == "PMI-1: the launcher did not take 'put' in time", outcome


def test_refused_command_names_rc(serve):
    serve(
        answers={"init": b"cmd=response_to_init pmi_version=1 pmi_subversion=1 rc=-1 msg=refused\n"}
    )
    with pytest.raises(pmca.world.LauncherError, match=r"^PMI-1: 'init' failed with rc=-1 refused"):
        pmca.world.from_pmi(timeout=5, version="1")


def test_refused_pmi2_command_names_it(serve):
    server = serve(answers={"kvs-put": frame("kvs-put-response", {"rc": "-2", "errmsg": "full"})})
    world = pmca.world.from_pmi(timeout=5, version="2")
    with pytest.raises(pmca.world.LauncherError, match=r"^PMI-2: 'kvs-put' failed with rc=-2 full"):
        world.allgather(b"entry", timeout=5)
    assert server.commands()[-1] == "kvs-put"


def live_job() -> str:
    """The job's name for the live view under these PMI variables (the world prints it first)."""
    identity = job_identity(os.environ)
    assert identity is not None, "the fake launcher's environment names a job"
    return identity[0]


def test_pmi2_refused_when_forced(serve):
    serve(versions=(1,))
    with pytest.raises(pmca.world.LauncherError, match=r"^PMI-2: 'init' failed with rc=-1"):
        pmca.world.from_pmi(timeout=5, version="2")


def test_auto_takes_pmi2_when_offered(serve):
    server = serve()
    world = pmca.world.from_pmi(timeout=5)
    assert isinstance(world, pmca.world.Pmi2World) and isinstance(world, pmca.world.PmiWorld)
    assert world.description == f"PMI-2 (job {live_job()}, PMI-2 job id job_7, rank 0 of 2)"
    assert "offers PMI-2" in world.why and world.universe_size == 2
    assert world.locality() is not None and world.locality().local == {0, 1}
    init, fullinit = server.log[:2]
    assert init[1:3] == (1, "init") and init[3]["pmi_version"] == "2"  # PMI-1 framing
    assert fullinit[1:3] == (2, "fullinit") and fullinit[3]["pmirank"] == "0"
    world.close()


def test_slurm_pads_the_length_on_the_right(serve, monkeypatch):
    # Slurm's --mpi=pmi2 answers b'114   cmd=fullinit-response;...' and wants its job id back.
    server = serve(header="left")
    monkeypatch.setenv("PMI_JOBID", "42.0")
    world = pmca.world.from_launcher(timeout=5)
    assert world.description == f"PMI-2 (job {live_job()}, PMI-2 job id job_7, rank 0 of 2)"
    assert server.log[1][2:] == (
        "fullinit",
        {"pmijobid": "42.0", "pmirank": "0", "threaded": "FALSE"},
    )
    assert message_end(b"2     cmd=xy") == 6 + 2
    world.close()


def test_auto_falls_back_to_pmi1(serve):
    server = serve(versions=(1,))
    world = pmca.world.from_pmi(timeout=5)
    assert type(world) is pmca.world.Pmi1World
    assert "does not offer PMI-2" in world.why, world.why
    assert server.commands()[:3] == ["init", "init", "get_maxes"]
    world.close()


@pytest.mark.parametrize(
    ("versions", "forced", "protocol", "why"),
    [
        ((1, 2), "auto", "PMI-2", "the launcher offers PMI-2"),
        ((1,), "auto", "PMI-1", "does not offer PMI-2"),
        ((1, 2), "1", "PMI-1", "pmca_base_pmi_version=1"),
    ],
)
def test_launcher_says_which_pmi_at_verbosity_1(serve, capsys, versions, forced, protocol, why):
    serve(versions=versions)
    world = pmca.world.from_launcher(timeout=5, verbose=1, pmi_version=forced)
    assert world.description.startswith(protocol)
    err = capsys.readouterr().err
    assert "PMI version" in err and f"protocol='{protocol}'" in err and why in err, err
    world.close()


def test_session_takes_the_pmi_version_parameter(serve):
    server = serve(versions=(1, 2))
    with pytest.raises(ParamError, match="pmca_base_pmi_version"):
        pmca.Session(mca={"pmca_base_world": "pmi", "pmca_base_pmi_version": "3"}).init()
    assert server.log == []  # refused before a word was sent


def test_pmi2_framing_and_escaping():
    message = frame("kvs-put", {"key": "a;b", "value": "x=y;;z"})
    assert message == b"    36cmd=kvs-put;key=a;;b;value=x=y;;;;z;"
    assert message_end(message + b"    10") == len(message)
    assert message_end(message[:-1]) is None
    assert parse(message.decode()) == {"cmd": "kvs-put", "key": "a;b", "value": "x=y;;z"}
    for garbage in (b"HTTP/1.1", b" 1 2  ", b"      "):
        with pytest.raises(ValueError, match="no length header"):
            message_end(garbage)


_SIZES = [0, 1, 5000, 100_000]
_CLIENT = """
import hashlib, json, sys
import pmca
version, size = sys.argv[1], int(sys.argv[2])
world = pmca.world.from_pmi(timeout=30, version=version)
digests = []
for n in [0, 1, 5000, 100_000]:
    mine = hashlib.shake_256(f"{world.rank}-{n}".encode()).digest(n)
    got = world.allgather(mine, timeout=30)
    digests.append([hashlib.sha256(entry).hexdigest() for entry in got])
world.barrier(timeout=30)
print(json.dumps({"rank": world.rank, "kind": type(world).__name__, "digests": digests}))
"""


def _run_clients(server, script, *args):
    """Run ``script`` as ranks 0 and 1 of ``server``'s job; their last output lines."""
    children = []
    for rank in range(2):
        fd = server.client_fd(rank)
        env = {**os.environ, "PMI_FD": str(fd), "PMI_RANK": str(rank), "PMI_SIZE": "2"}
        children.append(
            subprocess.Popen(
                [sys.executable, "-c", script, *args],
                env=env,
                pass_fds=[fd],
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                text=True,
            )
        )
    results = []
    for child in children:
        out, err = child.communicate(timeout=120)
        assert child.returncode == 0, err
        results.append(out.strip().splitlines()[-1])
    return results


_BARRIER = """
import os, sys, time
import pmca
world = pmca.world.from_pmi(timeout=30, version="2")
if world.rank == 1:
    time.sleep(1)
    open(sys.argv[1], "w").close()
world.barrier(timeout=30)
print("entered" if os.path.exists(sys.argv[1]) else "alone")
"""


def test_pmi2_barrier_waits_where_the_fence_does_not(tmp_path):
    # Hydra answers kvs-fence at once: a barrier made of it alone would let
    # rank 0 through before rank 1 arrives (rank 1 marks its arrival first).
    server = FakePmiServer(2, lazy_fence=True)
    try:
        results = _run_clients(server, _BARRIER, str(tmp_path / "arrived"))
    finally:
        server.close()
    assert results == ["entered", "entered"]


@pytest.mark.parametrize(
    ("version", "header"),
    [("1", "right"), ("2", "right"), ("2", "left")],
    ids=["1", "2", "2-slurm"],
)
def test_modex_and_fence_between_two_processes(version, header):
    # Two real clients in their own processes, one fake launcher: the fence
    # answers only once both entered, entries larger than a value are split.
    # Slurm's server pads PMI-2's lengths on the right (header="left").
    server = FakePmiServer(2, header=header)
    try:
        results = [json.loads(line) for line in _run_clients(server, _CLIENT, version, "2")]
    finally:
        server.close()
    for result in results:
        assert result["kind"] == {"1": "Pmi1World", "2": "Pmi2World"}[version]
        for index, n in enumerate(_SIZES):
            expected = [
                hashlib.sha256(hashlib.shake_256(f"{r}-{n}".encode()).digest(n)).hexdigest()
                for r in range(2)
            ]
            assert result["digests"][index] == expected, (n, result)
    names = {"1": ("put", "barrier_in", "get"), "2": ("kvs-put", "kvs-fence", "kvs-get")}
    put, fence, get = names[version]
    for rank in range(2):
        commands = server.commands(rank)
        assert commands[-1] == "finalize", commands  # sent at exit
        # Puts, then one fence, then gets, per exchange (and for the barrier);
        # 100 000 bytes took many puts of at most 1024 characters.
        assert commands.count(fence) == len(_SIZES) + 1, commands
        first_fence = commands.index(fence)
        assert commands[first_fence - 1] == put and commands[first_fence + 1] == get
        assert commands.count(put) > len(_SIZES) + 100_000 * 4 // 3 // 1024
    puts = [fields for _, _, cmd, fields in server.log if cmd == put]
    assert max(len(fields["value"]) for fields in puts) <= 1024
    assert max(len(fields["key"]) for fields in puts) <= 64
    if version == "2":  # the hints: this job, the rank whose entry it is
        gets = [(rank, fields) for rank, _, cmd, fields in server.log if cmd == get]
        assert gets and all(
            f["jobid"] == "job_7" and f["srcid"] == str(1 - rank) for rank, f in gets
        )
