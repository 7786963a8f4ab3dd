"""The Slurm cluster of pmca.testing: up with every node idle, gone when closed or killed."""

from __future__ import annotations

import subprocess
from collections.abc import Callable
from pathlib import Path

import pytest

from pmca.testing import SlurmCluster, Testbed, slurm_requirements

from ._killed_run import killed_run

pytestmark = pytest.mark.cluster


def _daemons(testbed: Testbed) -> set[str]:
    names = set()
    for host in testbed.hosts:
        for pid in host.processes():
            try:
                names.add(f"{host.name}:{Path(f'/proc/{pid}/comm').read_text().strip()}")
            except OSError:
                continue
    return names


def test_every_host_is_a_node_and_the_daemons_go_with_close(
    pmca_slurm: Callable[..., SlurmCluster],
) -> None:
    cluster = pmca_slurm(2)
    assert cluster.states() == dict.fromkeys(cluster.nodes, "idle")
    head, other = cluster.testbed.hosts
    assert _daemons(cluster.testbed) == {
        f"{head.name}:munged",
        f"{head.name}:slurmctld",
        f"{head.name}:slurmscriptd",  # slurmctld's helper
        f"{head.name}:slurmd",
        f"{other.name}:slurmd",
    }
    # Each task runs on its host, under the hostname the testbed gave it.
    done = cluster.srun(["hostname"], nodes=2, tasks=4, mpi="none", timeout=60)
    assert done.returncode == 0, done.stderr
    assert sorted(done.stdout.split()) == sorted([head.hostname, other.hostname] * 2)
    cluster.close()
    assert _daemons(cluster.testbed) == set()


def test_a_killed_run_leaves_no_daemon_behind(tmp_path: Path) -> None:
    why = slurm_requirements()
    if why is not None:
        pytest.skip(why)
    build = """
        from pmca.testing import SlurmCluster, Testbed
        testbed = Testbed(2).start()
        SlurmCluster(testbed).start()
    """
    tag = killed_run(tmp_path, build)
    left = subprocess.run(["pgrep", "-f", tag], capture_output=True, text=True).stdout.split()
    assert left, "the killed run's daemons should outlive it until the next run"
    with Testbed(1):
        survivors = subprocess.run(["pgrep", "-f", tag], capture_output=True, text=True)
        assert survivors.stdout.split() == [], survivors.stdout
        assert not (Path("/run/pmca-testbed") / tag).exists()
