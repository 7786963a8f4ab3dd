"""``pmca stats``: the live view of running processes, and refusing another user's."""

from __future__ import annotations

import json
import os
import stat
import subprocess
import sys
import textwrap
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

import pmca
from pmca.cli._stats import StatsError, read_socket
from pmca.session._live import live_directory, remove_stale
from pmca.testing import find_launcher

_TARGET = textwrap.dedent(
    """
    import json, os, sys, time
    import pmca
    import pmca.session._live
    from pmca.mca._pvars import REGISTRY

    def traffic(s):
        s.p2p.send(0, 1, b"x" * 1000)
        s.p2p.recv(0, 1, bytearray(1000))

    if len(sys.argv) > 1:
        # Another user cannot read root's interpreter: import everything first.
        with pmca.Session(mca={"pmca_base_live_view": "off"}) as s:
            traffic(s)
        os.setgid(int(sys.argv[1]))
        os.setuid(int(sys.argv[1]))
    with pmca.Session(mca={"pmca_base_live_view": "on"}) as s:
        traffic(s)
        mine = REGISTRY.read("btl_self_bytes_sent", 0)
        print(json.dumps({"pid": os.getpid(), "sent": mine}), flush=True)
        sys.stdin.read()  # until the test closes it
    """
)


def _start(
    tmp_path: Path, *extra: str, env: dict[str, str] | None = None
) -> tuple[subprocess.Popen[str], dict[str, int]]:
    script = tmp_path / "target.py"
    script.write_text(_TARGET)
    child = subprocess.Popen(
        [sys.executable, str(script), *extra],
        env=None if env is None else {**os.environ, **env},
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    assert child.stdout is not None
    line = child.stdout.readline()
    if not line:
        child.wait(timeout=60)
        pytest.fail(f"target did not start: {child.stderr.read() if child.stderr else ''}")
    return child, json.loads(line)


def _stop(child: subprocess.Popen[str]) -> None:
    child.communicate(timeout=60)  # closes its stdin: it finalizes and exits


def test_stats_reads_a_running_process(cli, tmp_path) -> None:
    child, info = _start(tmp_path)
    try:
        result = cli("stats", str(info["pid"]), "--json")
        table = cli("stats", str(info["pid"]))
    finally:
        _stop(child)
    assert result.code == 0, result.err
    (process,) = json.loads(result.out)["processes"]
    assert process["pid"] == info["pid"]
    # What the process counted itself, read from outside.
    assert process["pvars"]["btl_self_bytes_sent"] == {"0": info["sent"]} and info["sent"] > 1000
    assert table.code == 0
    assert f"pid {info['pid']}" in table.out
    assert "btl_self_bytes_sent[0]" in table.out and str(info["sent"]) in table.out
    # The socket is gone with the last finalize.
    assert not list(Path(f"/tmp/pmca-{os.getuid()}").glob(f"*{info['pid']}.sock"))


def _dead_pid() -> int:
    gone = subprocess.Popen(["true"])
    gone.wait()
    return gone.pid


def _left_behind(path: Path) -> Path:
    """A socket file as a killed process leaves it: bound once, nobody listening."""
    import socket

    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
        sock.bind(str(path))
    return path


def test_opening_a_live_view_removes_what_killed_processes_left(tmp_path) -> None:
    sleeper = subprocess.Popen(["sleep", "60"])
    try:
        dead, alive, me = _dead_pid(), sleeper.pid, os.getpid()
        names = {
            "dead": f"job.0.{dead}.sock",
            "dead alone": f"{dead}.sock",
            "mine, another job": f"old.3.{me}.sock",
            "alive": f"job.1.{alive}.sock",
            "no pid": "job.sock",
        }
        for name in names.values():
            _left_behind(tmp_path / name)
        removed = remove_stale(tmp_path, me)
        assert sorted(path.name for path in removed) == sorted(
            names[k] for k in ("dead", "dead alone", "mine, another job")
        )
        # A live process's socket is never touched, even one nobody answers on.
        remaining = sorted(p.name for p in tmp_path.iterdir())
        assert remaining == sorted([names["alive"], names["no pid"]])
    finally:
        sleeper.kill()
        sleeper.wait()


def test_sockets_nobody_listens_on_neither_hide_nor_fail_a_live_process(cli, tmp_path) -> None:
    job = f"stalejob-{os.getpid()}"
    directory = live_directory(os.environ)
    sleeper = subprocess.Popen(["sleep", "60"])
    child, info = _start(tmp_path, env={"PMIX_NAMESPACE": job, "PMIX_RANK": "1"})
    left: list[Path] = []
    try:
        pid = info["pid"]
        # Ids are reused: older processes of other jobs held this one's pid.
        left += [_left_behind(directory / f"older{n}.0.{pid}.sock") for n in range(6)]
        # In the job: a rank that was killed, and one whose pid another process holds now.
        left.append(_left_behind(directory / f"{job}.0.{_dead_pid()}.sock"))
        left.append(_left_behind(directory / f"{job}.2.{sleeper.pid}.sock"))
        by_pid = cli("stats", str(pid), "--json")
        by_job = cli("stats", "--job", job, "--json")
        only_stale = cli("stats", str(sleeper.pid))
    finally:
        _stop(child)
        sleeper.kill()
        sleeper.wait()
        for path in left:
            path.unlink(missing_ok=True)
    assert by_pid.code == 0, by_pid.err
    assert [p["pid"] for p in json.loads(by_pid.out)["processes"]] == [pid]
    assert by_job.code == 0, by_job.err
    assert [(p["pid"], p["rank"]) for p in json.loads(by_job.out)["processes"]] == [(pid, 1)]
    assert f"nobody listens on {job}.2.{sleeper.pid}.sock" in by_job.err
    assert "skipped" in by_job.err
    # Asked for by pid, a process with only a dead socket is an error, named.
    assert only_stale.code == 1
    assert f"process {sleeper.pid}: nobody listens on {job}.2.{sleeper.pid}.sock" in only_stale.err


@contextmanager
def _traversable_by_others(*paths: Path) -> Iterator[None]:
    """Let another user reach ``paths`` (the interpreter's environment, the
    script) for the test's duration: tox keeps its environments under a
    private ``.tox``, and a process that gave up root imports from there."""
    opened: list[tuple[Path, int]] = []
    try:
        for path in paths:
            for folder in (path, *path.parents):
                mode = folder.stat().st_mode
                if not mode & stat.S_IXOTH:
                    folder.chmod(mode | stat.S_IXOTH)
                    opened.append((folder, mode))
        yield
    finally:
        for folder, mode in reversed(opened):
            folder.chmod(stat.S_IMODE(mode))


@pytest.mark.skipif(os.geteuid() != 0, reason="needs root to run a process as another user")
def test_another_users_process_is_refused(cli, tmp_path) -> None:
    nobody = 65534
    environment = Path(sys.prefix).resolve(), Path(pmca.__file__).resolve().parent, tmp_path
    with _traversable_by_others(*environment):
        child, info = _start(tmp_path, str(nobody))
    try:
        result = cli("stats", str(info["pid"]))
        # The process itself refuses a reader of another uid (SO_PEERCRED).
        sockets = list(Path(f"/tmp/pmca-{nobody}").glob(f"*{info['pid']}.sock"))
        assert len(sockets) == 1
        with pytest.raises(StatsError, match=f"refused: process {info['pid']} belongs to uid"):
            read_socket(sockets[0], info["pid"])
    finally:
        _stop(child)
    assert result.code == 1
    assert f"process {info['pid']}: refused: it belongs to uid {nobody}" in result.err
    assert result.out == ""


_RANK = textwrap.dedent(
    """
    import json, os, sys, time
    import pmca
    stop = sys.argv[1]
    with pmca.Session() as s:  # live view 'auto': on under the launcher
        s.p2p.send(0, 1, b"x" * 10)
        s.p2p.recv(0, 1, bytearray(10))
        print(json.dumps({"job": os.environ["PMIX_NAMESPACE"], "pid": os.getpid()}), flush=True)
        deadline = time.monotonic() + 120
        while not os.path.exists(stop) and time.monotonic() < deadline:
            time.sleep(0.05)
    """
)


def test_stats_job_shows_both_ranks_under_mpirun(cli, tmp_path) -> None:
    launcher = find_launcher()
    if launcher is None or launcher.name != "openmpi":
        pytest.skip("needs Open MPI's mpirun")
    script = tmp_path / "rank.py"
    script.write_text(_RANK)
    stop = tmp_path / "stop"
    job = subprocess.Popen(
        [*launcher.command(2), sys.executable, str(script), str(stop)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, "TMPDIR": str(tmp_path)},  # the launcher's files go with the test
    )
    assert job.stdout is not None
    try:
        ranks = [json.loads(job.stdout.readline()) for _ in range(2)]
        time.sleep(0.2)
        result = cli("stats", "--job", ranks[0]["job"], "--json")
    finally:
        stop.touch()
        _, err = job.communicate(timeout=120)
    assert job.returncode == 0, err
    assert result.code == 0, result.err
    processes = json.loads(result.out)["processes"]
    assert sorted(p["rank"] for p in processes) == [0, 1]
    assert sorted(p["pid"] for p in processes) == sorted(r["pid"] for r in ranks)


_IDENTITY = textwrap.dedent(
    """
    import os, subprocess, sys
    from pmca._job import job_identity
    print(job_identity(os.environ)[0], flush=True)
    if len(sys.argv) > 1:  # and a tool this process starts, one level deeper
        subprocess.run([sys.executable, __file__], check=True)
    """
)


def test_a_hydra_job_is_named_after_its_proxy_however_deep(tmp_path) -> None:
    # Hydra gives its ranks PMI_* variables only: what the ranks of a host and
    # the tools they start share is the proxy that started them.
    proxy = tmp_path / "hydra_pmi_proxy"  # the kernel names the process after it
    proxy.symlink_to("/bin/sh")
    script = tmp_path / "identity.py"
    script.write_text(_IDENTITY)
    done = subprocess.run(
        [str(proxy), "-c", '"$1" "$2" deeper; echo "proxy $$"', "sh", sys.executable, str(script)],
        capture_output=True,
        text=True,
        timeout=60,
        env={**os.environ, "PMI_RANK": "3"},
        check=False,
    )
    assert done.returncode == 0, done.stderr
    rank, tool, last = done.stdout.split("\n")[:3]
    proxy_pid = int(last.removeprefix("proxy "))
    assert rank == tool == f"pmi-{proxy_pid}", done.stdout


def test_list_shows_live_jobs_and_ranks_of_this_host(cli, tmp_path) -> None:
    job = f"listjob-{os.getpid()}"
    child, info = _start(tmp_path, env={"PMIX_NAMESPACE": job, "PMIX_RANK": "3"})
    try:
        listed = cli("stats", "--list")
        as_json = cli("stats", "--list", "--json")
    finally:
        _stop(child)
    after = cli("stats", "--list", "--json")
    assert listed.code == 0, listed.err
    assert listed.lines[0].split() == ["job", "rank", "pid"]
    assert [line.split() for line in listed.lines if job in line] == [[job, "3", str(info["pid"])]]
    entries = [p for p in json.loads(as_json.out)["processes"] if p["job"] == job]
    assert [(p["rank"], p["pid"]) for p in entries] == [(3, info["pid"])]
    assert entries[0]["socket"].endswith(f"/{job}.3.{info['pid']}.sock")
    assert not [p for p in json.loads(after.out)["processes"] if p["job"] == job]


_ALL_ENDED = "pmca stats: every process watched has ended or closed its live view"


def test_watch_ends_when_the_processes_watched_have_ended(tmp_path) -> None:
    child, info = _start(tmp_path)
    watcher = subprocess.Popen(
        [sys.executable, "-m", "pmca", "stats", str(info["pid"]), "--watch", "0.2"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert watcher.stdout is not None
        assert watcher.stdout.readline().startswith("pvar"), "one table read first"
        _stop(child)
        _, err = watcher.communicate(timeout=30)  # the old code printed "no such process" on
    finally:
        if watcher.poll() is None:
            watcher.kill()
            watcher.wait()
    assert watcher.returncode == 0, err
    # Seen between its finalize and its exit, or after: either is said, once.
    assert err.splitlines() in (
        [f"pmca stats: process {info['pid']} {gone}", _ALL_ENDED]
        for gone in ("has ended", "closed its live view")
    )


_PMI_RANK = textwrap.dedent(
    """
    import json, os, sys
    import pmca
    mca = {"pmca_base_live_view": "on", "pmca_base_pmi_version": "1"}
    with pmca.Session(world="pmi", mca=mca, frameworks=[]) as s:
        print(json.dumps({"pid": os.getpid(), "world": s.world.description}), flush=True)
        sys.stdin.read()
    """
)


def test_the_job_name_a_pmi_world_prints_finds_its_live_view(cli) -> None:
    """Hydra's ranks name their live view ``pmi-<proxy>``; their world prints that name
    first, then its own (``kvs kvs_7``), and ``pmca stats --job`` takes either."""
    from tests.world._fake_pmi import FakePmiServer

    server = FakePmiServer(1)
    fd = server.client_fd(0)
    env = {**os.environ, "PMI_FD": str(fd), "PMI_RANK": "0", "PMI_SIZE": "1"}
    child = subprocess.Popen(
        [sys.executable, "-c", _PMI_RANK],
        env=env,
        pass_fds=[fd],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert child.stdout is not None
        line = child.stdout.readline()
        assert line, child.stderr.read() if child.stderr else ""
        pid, world = json.loads(line)["pid"], json.loads(line)["world"]
        by_kvs = cli("stats", "--job", "kvs_7", "--json")
        by_proxy = cli("stats", "--job", f"pmi-{os.getpid()}", "--json")
    finally:
        _stop(child)
        server.close()
    assert by_kvs.code == 0, by_kvs.err
    (process,) = json.loads(by_kvs.out)["processes"]
    assert (process["pid"], process["job"], process["aliases"]) == (
        pid,
        f"pmi-{os.getpid()}",
        ["kvs_7"],
    )
    assert [p["pid"] for p in json.loads(by_proxy.out)["processes"]] == [pid]
    assert world == f"PMI-1 (job pmi-{os.getpid()}, kvs kvs_7, rank 0 of 1)"
