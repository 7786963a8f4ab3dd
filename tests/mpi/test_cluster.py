"""pmca across simulated hosts (network + UTS namespaces) under a real launcher.

The launcher runs on the first host and starts its daemons on the others
through the testbed's ssh stand-in; every rank checks where it landed.
Needs root (skipped otherwise, saying so).
"""

from __future__ import annotations

import re
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from pmca.testing import Launcher, Testbed

from .conftest import _HAS_SM, ok_lines, program

pytestmark = [pytest.mark.mpi, pytest.mark.cluster]

BTL = "self,sm,tcp" if _HAS_SM else "self,tcp"


def _output(child: object) -> str:
    return f"--- stdout\n{getattr(child, 'stdout', '')}\n--- stderr\n{getattr(child, 'stderr', '')}"


@pytest.mark.parametrize(("hosts", "per_host"), [(2, 2), (3, 1)], ids=["2x2", "3x1"])
def test_every_size_between_every_pair_across_hosts(
    launcher: Launcher, pmca_env, pmca_testbed: Callable[..., Testbed], hosts: int, per_host: int
) -> None:
    testbed = pmca_testbed(hosts)
    argv = [program("cluster.py"), "--btl", BTL, "--hosts", str(hosts)]
    child = testbed.run_mpi(launcher, per_host, argv, timeout=600)
    assert child.returncode == 0, _output(child)
    lines = ok_lines(child.stdout)
    assert len(lines) == hosts * per_host, _output(child)
    assert all(f"of {hosts} hosts, every pair checksummed" in line for line in lines), lines
    # Ranks name the hosts they ran on: every host has its share.
    for host in testbed.hosts:
        assert sum(f"on {host.hostname} " in line for line in lines) == per_host, lines


def test_zero_copy_over_a_slow_link_keeps_every_byte(
    launcher: Launcher, pmca_env, pmca_testbed: Callable[..., Testbed]
) -> None:
    # 400 Mbit/s: the kernel reads zero-copy pages long after send() returned.
    testbed = pmca_testbed(2, rate="400mbit")
    argv = [program("cluster.py"), "--btl", "self,tcp", "--hosts", "2"]
    argv += ["--zerocopy", "true", "--max-size", str(16 << 20)]
    child = testbed.run_mpi(launcher, 2, argv, timeout=600)
    assert child.returncode == 0, _output(child)
    lines = ok_lines(child.stdout)
    assert len(lines) == 4, _output(child)
    for line in lines:
        found = re.search(r"sends=(\d+), completions=(\d+)", line)
        assert found is not None, line
        sends, completions = map(int, found.groups())
        # The zero-copy path ran, and the kernel reported reading those pages.
        assert sends > 0 and completions > 0, line


def _wait_for(testbed: Testbed, path: Path, text: str, child, timeout: float) -> str:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        found = path.read_text() if path.exists() else ""
        if text in found:
            return found
        if child.poll() is not None:
            break
        time.sleep(0.05)
    stdout, stderr = testbed.stop(child)
    found = path.read_text() if path.exists() else ""
    raise AssertionError(
        f"no {text!r} in time\n{found}\n--- stdout\n{stdout}\n--- stderr\n{stderr}"
    )


def _monotonic(report: str, what: str) -> list[float]:
    return [float(x) for x in re.findall(rf"{what} monotonic ([0-9.]+)", report)]


@pytest.mark.parametrize("outage", ["link-down", "frozen"])
def test_a_lost_host_fails_its_peers_within_the_keepalive_bound(
    launcher: Launcher, pmca_env, pmca_testbed: Callable[..., Testbed], tmp_path, outage: str
) -> None:
    testbed = pmca_testbed(3)
    victim = testbed.hosts[2]
    victim.limit("200mbit")  # a 16 MiB round takes long enough to be cut in the middle
    result = tmp_path / "result"
    keepalive = 2
    bound = keepalive + 1 * 2  # time + interval * probes, as the program sets them
    argv = [program("cluster.py"), "--btl", BTL, "--hosts", "3", "--case", "outage"]
    argv += ["--keepalive", str(keepalive), "--result", str(result)]
    child = testbed.start_mpi(launcher, 1, argv, launcher_args=launcher.keep_going_args())
    try:
        _wait_for(testbed, result, "transfer monotonic", child, 120)
        if outage == "link-down":
            victim.link_down()
        else:
            victim.freeze()
        cut = time.monotonic()
        for rank in (0, 1):  # the survivors finalize
            finalized = f"OK rank {rank} on {testbed.hosts[rank].hostname}: finalized"
            _wait_for(testbed, result, finalized, child, 60)
    finally:
        testbed.stop(child)
    report = result.read_text()
    for rank in (0, 1):
        failed = [
            line
            for line in ok_lines(report)
            if line.startswith(f"OK rank {rank} ") and "PeerFailed" in line
        ]
        # Each survivor names the rank it lost and that rank's host.
        assert failed and f"rank 2 on host {victim.hostname}" in failed[0], report
    noticed = [t - cut for t in _monotonic(report, "failed")]
    assert len(noticed) >= 2 and max(noticed) <= bound + 2.0, (
        f"noticed {noticed} s after the outage (bound {bound} s)\n{report}"
    )


def test_a_frozen_host_back_within_the_bound_loses_nothing(
    launcher: Launcher, pmca_env, pmca_testbed: Callable[..., Testbed], tmp_path
) -> None:
    testbed = pmca_testbed(2)
    victim = testbed.hosts[1]
    victim.limit("200mbit")
    result = tmp_path / "result"
    argv = [program("cluster.py"), "--btl", BTL, "--hosts", "2", "--case", "outage"]
    argv += ["--keepalive", "4", "--result", str(result)]
    child = testbed.start_mpi(launcher, 1, argv, launcher_args=launcher.keep_going_args())
    try:
        _wait_for(testbed, result, "transfer monotonic", child, 120)
        victim.freeze()
        time.sleep(2.0)  # well inside the bound: 4 + 1 * 2 s
        victim.thaw()
        for rank in (0, 1):
            _wait_for(
                testbed,
                result,
                f"OK rank {rank} on {testbed.hosts[rank].hostname}: fin",
                child,
                120,
            )
    finally:
        stdout, stderr = testbed.stop(child)
    report = result.read_text()
    assert "PeerFailed" not in report, f"{report}\n{stdout}\n{stderr}"
    assert report.count("rounds arrived intact") == 2, f"{report}\n{stdout}\n{stderr}"


def test_large_messages_stripe_over_every_rail(
    launcher: Launcher, pmca_env, pmca_testbed: Callable[..., Testbed]
) -> None:
    # Two networks; one rail rate limited and weighed so (veth reports no speed):
    # each carries its share by the configured bandwidths, nothing is lost.
    testbed = pmca_testbed(2, networks=2)
    for host in testbed.hosts:
        host.limit("300mbit", network=1)
    argv = [program("rails.py"), "--btl", "self,tcp", "--size", str(16 << 20)]
    argv += ["--if-bandwidth", "net0:900,net1:300"]
    child = testbed.run_mpi(launcher, 1, argv, timeout=300)
    assert child.returncode == 0, _output(child)
    lines = ok_lines(child.stdout)
    assert len(lines) == 2, _output(child)
    sender = next(line for line in lines if line.startswith("OK rank 0 "))
    assert "reach=tcp,tcp " in sender, sender
    sent = {name: int(count) for name, count in re.findall(r"'(net\d)': (\d+)", sender)}
    # btl_tcp_if_bandwidth 900 and 300: the bml gives net0 3/4 of each message
    # and net1 1/4 (equal weights would give each about half).
    share = sent["net0"] / (sent["net0"] + sent["net1"])
    assert 0.65 < share < 0.85, sender


@pytest.mark.parametrize("pmi_version", ["auto", "1"])
def test_launcher_world_locality_across_hosts(
    launcher: Launcher,
    pmca_env,
    pmca_testbed: Callable[..., Testbed],
    tmp_path,
    pmi_version: str,
) -> None:
    # No mpi4py: the world comes from mpirun's PMIx (or mpiexec's PMI), and
    # its placement must match where each rank finds itself (hostname, netns).
    kind = "pmix" if launcher.name == "openmpi" else "pmi"
    if kind == "pmix" and pmi_version != "auto":
        pytest.skip("pmca_base_pmi_version is for MPICH's PMI; mpirun serves PMIx")
    # Host names unlike the launcher's names for them: PMIx must report what
    # each host calls itself (PMI's process mapping numbers the hosts instead).
    testbed = pmca_testbed(2, hostnames=["north", "south"])
    result = tmp_path / "result"
    argv = [program("launcher_world.py"), "--case", "hosts", "--expect", kind]
    argv += ["--btl", BTL, "--result", str(result)]
    env = {"PMCA_MCA_pmca_base_pmi_version": pmi_version}
    child = testbed.run_mpi(launcher, 2, argv, timeout=300, env=env)
    reported = result.read_text() if result.exists() else ""
    output = f"--- result\n{reported}{_output(child)}"
    assert child.returncode == 0, output
    lines = ok_lines(reported)
    assert len(lines) == 4, output
    assert all("every pair checksummed" in line for line in lines), output
    for host in testbed.hosts:
        assert sum(f"on {host.hostname}:" in line for line in lines) == 2, output
    protocol = {"pmix": "PMIx", "pmi": "PMI-1" if pmi_version == "1" else "PMI-2"}[kind]
    assert all(f": {protocol} " in line for line in lines), output
    if kind == "pmix":
        assert all("hosts north,south,north,south " in line for line in lines), output


def test_a_killed_job_leaves_its_session_files_only_in_the_testbed(
    launcher: Launcher, pmca_env, pmca_testbed: Callable[..., Testbed], tmp_path: Path
) -> None:
    if launcher.name != "openmpi":
        pytest.skip("Open MPI's launcher and daemons keep session files; Hydra's do not")
    testbed = pmca_testbed(2)
    started = tmp_path / "started"
    started.mkdir()
    sleep = (
        f"import os, time; open(os.path.join({str(started)!r}, str(os.getpid())), 'w'); "
        "time.sleep(300)"
    )
    child = testbed.start_mpi(launcher, 1, ["-c", sleep])
    deadline = time.monotonic() + 120
    while len(list(started.iterdir())) < 2:
        assert child.poll() is None and time.monotonic() < deadline, testbed.stop(child)
        time.sleep(0.05)
    testbed.stop(child)  # SIGKILL everywhere: nobody removes their session files
    left = {p.name.split(".")[0] for p in testbed.scratch.iterdir()}
    assert {"ompi", "prted"} <= left, sorted(testbed.scratch.iterdir())
    scratch = testbed.scratch
    testbed.close()
    assert not scratch.exists()
