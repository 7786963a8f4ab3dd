"""``pmca stats --job`` run inside a job, from the environment its launcher gave it.

Under Open MPI's mpirun the job is PMIx's namespace; under MPICH's Hydra,
which sets only PMI variables, it is the host's Hydra proxy, found however
deep under it the reading process is (here: a child of rank 0).
"""

from __future__ import annotations

import json

import pytest

from pmca.testing import Launcher, run_mpi

from .conftest import program

pytestmark = pytest.mark.mpi


def test_stats_job_from_inside_the_job_shows_every_rank(launcher: Launcher, tmp_path) -> None:
    ranks = 2
    child = run_mpi(
        launcher,
        ranks,
        [program("stats_job.py"), "--dir", str(tmp_path), "--ranks", str(ranks)],
        timeout=240,
        env={"PMCA_MCA_btl": "self"},
    )
    assert child.returncode == 0, child.stdout + child.stderr
    read = json.loads((tmp_path / "stats.json").read_text())
    assert read["code"] == 0, read["err"]
    processes = json.loads(read["out"])["processes"]
    started = [json.loads((tmp_path / f"rank{r}").read_text()) for r in range(ranks)]
    assert sorted(p["rank"] for p in processes) == list(range(ranks))
    assert sorted(p["pid"] for p in processes) == sorted(r["pid"] for r in started)
    assert {p["job"] for p in processes} == {started[0]["job"]}
    # One job id: the world prints the one the live view bears and --job found.
    assert all(f"(job {r['job']}," in r["world"] for r in started), started
