"""A launcher's world from birth to exit under the real launcher (programs/world_lifetime.py).

A world built with ``from_launcher()`` and never closed is closed at the
interpreter's exit, before mpi4py finalizes MPI: before, the PMIx
reference it held made Open MPI's mpirun take the rank for a failed one
("exiting improperly", exit status 1, the rank's last output possibly
lost) for a job that succeeded. Every collective is bounded: with a peer
that never joins, one called without a timeout ends in ``WorldTimeout``
within the world's bound; PMIx fences waited forever before.
"""

from __future__ import annotations

import re

import pytest

from pmca.testing import Launcher, run_mpi

from .conftest import program

pytestmark = pytest.mark.mpi


def _run(launcher: Launcher, case: str, tmp_path) -> tuple[int, str, str, str]:
    """Exit status, stdout, the ranks' reports, and everything (for messages)."""
    result = tmp_path / "result"
    argv = [program("world_lifetime.py"), "--case", case, "--result", str(result)]
    child = run_mpi(launcher, 2, argv, timeout=120)
    reported = result.read_text() if result.exists() else ""
    output = f"--- result\n{reported}--- stdout\n{child.stdout}\n--- stderr\n{child.stderr}"
    return child.returncode, child.stdout, reported, output


@pytest.mark.parametrize("case", ["unclosed", "unclosed-beside-mpi", "with"])
def test_a_world_closed_or_not_ends_the_job_cleanly(launcher: Launcher, pmca_env, tmp_path, case):
    returncode, stdout, reported, output = _run(launcher, case, tmp_path)
    assert returncode == 0, output
    assert sorted(re.findall(r"LAST rank \d", stdout)) == ["LAST rank 0", "LAST rank 1"], output
    assert "exiting improperly" not in output, output
    if case == "with":  # the block closed it: using it afterwards is refused, named
        assert sorted(re.findall(r"rank (\d) closed: .*closed", reported)) == ["0", "1"], output


def test_a_collective_without_a_peer_ends_within_its_bound(launcher: Launcher, pmca_env, tmp_path):
    returncode, stdout, reported, output = _run(launcher, "silent-peer", tmp_path)
    found = re.findall(r"rank 0 (\S+) (WorldTimeout|LauncherError) after ([0-9.]+)s", reported)
    assert [what for what, _, _ in found] == ["barrier", "allgather", "barrier(timeout=1)"], output
    # The first waits the world's bound (2 s), named as a timeout; PMIx keeps
    # going after one, PMI refuses the conversation that fell out of step.
    assert found[0][1] == "WorldTimeout", output
    bounds = {"barrier": 2.0, "allgather": 2.0, "barrier(timeout=1)": 1.0}
    for what, error, seconds in found:
        if error == "WorldTimeout":
            # whole seconds for PMIx's server, one more for its answer, a loaded machine
            assert float(seconds) < bounds[what] + 1 + 3, output
    if launcher.name == "openmpi":
        assert [error for _, error, _ in found] == ["WorldTimeout"] * 3, output
    assert returncode == 0, output
    assert sorted(re.findall(r"LAST rank \d", stdout)) == ["LAST rank 0", "LAST rank 1"], output
