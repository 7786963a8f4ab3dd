"""pmca inside every rank of a real 2-rank MPI job (Open MPI's mpirun, MPICH's mpiexec).

Both wheels bundle UCX, whose ucm patches libc as soon as libmpi is loaded.
Each run checks, in every rank: every munmap of a known address after MPI
init reaches a pmca callback; ``support_level()`` is what a fresh self-test
proves at each step; neither finalize order crashes (even ranks finalize
pmca first, odd ranks MPI first); libc's prologues end as UCX, the last
owner, left them.  See rank_program.py.
"""

from __future__ import annotations

import json
import sys

import pytest

from .conftest import PROGRAM, results, run_program

pytestmark = pytest.mark.native


@pytest.mark.parametrize("order", ["mpi-first", "pmca-first"])
def test_two_ranks(order, launcher, pmca_load_mode):
    result = run_program([*launcher, sys.executable, str(PROGRAM), order, pmca_load_mode])
    ranks = [json.loads(line.split(" ", 1)[1]) for line in results(result.stdout)]
    assert len(ranks) == 2, result.stdout + result.stderr
    assert sorted(rank["pmca_first"] for rank in ranks) == [False, True]
    expected = ["ucm"] if order == "mpi-first" else ["patcher"]
    assert all(rank["selected"] == expected for rank in ranks)
    if order == "pmca-first":
        # Reported once per rank, at the default verbosity.
        assert result.stderr.count("memory hooks overwritten") == 2, result.stderr
        assert "UCX ucm (libucm.so.0)" in result.stderr
