"""Worlds from the launcher itself: PMIx under Open MPI's mpirun, PMI under MPICH's mpiexec.

The programs import no mpi4py (checked) unless the case brings MPI in on
purpose, before or after the world is built.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys

import pytest

from pmca.testing import Launcher, run_mpi

from .conftest import _HAS_SM, ok_lines, program

pytestmark = pytest.mark.mpi


def _kind(launcher: Launcher) -> str:
    return "pmix" if launcher.name == "openmpi" else "pmi"


def _protocol(launcher: Launcher, pmi_version: str = "auto") -> str:
    """What the world's description starts with: Hydra offers PMI-2, taken unless forced to 1."""
    if _kind(launcher) == "pmix":
        return "PMIx"
    return "PMI-1" if pmi_version == "1" else "PMI-2"


def _run(
    launcher: Launcher,
    ranks: int,
    case: str,
    tmp_path,
    *,
    btl="self,sm,tcp",
    pmi_version="auto",
    env=None,
    **kwargs,
):
    """Run a case; ``pmi_version`` as ``pmca_base_pmi_version`` (for MPICH's mpiexec only)."""
    if pmi_version != "auto" and launcher.name == "openmpi":
        pytest.skip("pmca_base_pmi_version is for MPICH's PMI; mpirun serves PMIx")
    env = {**(env or {}), "PMCA_MCA_pmca_base_pmi_version": pmi_version}
    kwargs["env"] = env
    result = tmp_path / "result"
    argv = [program("launcher_world.py"), "--case", case, "--expect", _kind(launcher)]
    argv += ["--pmi-version", pmi_version]
    child = run_mpi(
        launcher, ranks, [*argv, "--btl", btl, "--result", str(result)], timeout=240, **kwargs
    )
    reported = result.read_text() if result.exists() else ""
    return child, reported, f"--- result\n{reported}--- stdout\n{child.stdout}\n{child.stderr}"


@pytest.mark.skipif(not _HAS_SM, reason="btl sm is not built")
@pytest.mark.parametrize(("ranks", "pmi_version"), [(2, "auto"), (4, "auto"), (2, "1"), (2, "2")])
def test_launcher_world_every_size_without_mpi(
    launcher: Launcher, pmca_env, tmp_path, ranks, pmi_version
):
    # No world in the program: pmca_base_world=launcher from the environment.
    env = {"PMCA_MCA_pmca_base_world": "launcher"}
    child, reported, output = _run(
        launcher, ranks, "sizes", tmp_path, env=env, pmi_version=pmi_version
    )
    assert child.returncode == 0, output
    lines = ok_lines(reported)
    assert len(lines) == ranks, output
    assert all(_protocol(launcher, pmi_version) in line for line in lines), output


@pytest.mark.skipif(not _HAS_SM, reason="btl sm is not built")
def test_killed_rank_reported_by_pmix_event(launcher: Launcher, pmca_env, tmp_path):
    if launcher.name != "openmpi":
        pytest.skip("PMI has no failure events")
    # PRRTE sends process-failure events only with both options.
    _, reported, output = _run(
        launcher,
        2,
        "killed",
        tmp_path,
        btl="self,sm",
        launcher_args=["--runtime-options", "recoverable,notifyerrors"],
    )
    lines = ok_lines(reported)
    assert lines and "PMIX_ERR_PROC_ABORTED_BY_SIG" in lines[0], output
    seconds = float(re.search(r"peer error ([0-9.]+)s after the death", lines[0])[1])
    # tcp keepalive would take 10 + 2 * 3 s by default; rank 0 sleeps 1 s of it.
    assert seconds < (10 + 2 * 3) / 2, output


@pytest.mark.parametrize("pmi_version", ["auto", "1"])
@pytest.mark.parametrize("order", ["mpi-before", "mpi-after"])
def test_world_beside_mpi(launcher: Launcher, pmca_env, tmp_path, order, pmi_version):
    if order == "mpi-after" and launcher.name == "openmpi":
        pytest.skip(
            "Open MPI 5.0 skips PMIx_Init when PMIx is already initialized and then "
            "cannot find its own process: MPI must be initialized before a PMIx world"
        )
    child, reported, output = _run(
        launcher, 2, order, tmp_path, btl="self,tcp", pmi_version=pmi_version
    )
    assert child.returncode == 0, output
    lines = ok_lines(reported)
    assert len(lines) == 2, output
    assert all(_protocol(launcher, pmi_version) in line for line in lines), output


@pytest.mark.parametrize("pmi_version", ["1", "2"])
def test_entry_too_large_for_pmi(launcher: Launcher, pmca_env, tmp_path, pmi_version):
    if launcher.name == "openmpi":
        pytest.skip("PMIx carries any size; the limit is PMI's")
    child, reported, output = _run(launcher, 2, "too-large", tmp_path, pmi_version=pmi_version)
    assert child.returncode == 0, output
    lines = ok_lines(reported)
    assert len(lines) == 2, output
    assert all(f"PMI-{pmi_version}: a modex entry" in line for line in lines), output


def test_pmix_server_gone(launcher: Launcher, pmca_env, tmp_path):
    if launcher.name != "openmpi":
        pytest.skip("needs Open MPI's PMIx server")
    # The environment mpirun gives a rank, used after mpirun has exited.
    dump = "import os, json; print(json.dumps({k: v for k, v in os.environ.items()}))"
    child = run_mpi(launcher, 1, ["-c", dump])
    assert child.returncode == 0, child.stderr
    env = __import__("json").loads(child.stdout.strip().splitlines()[-1])
    assert "PMIX_NAMESPACE" in env
    probe = (
        "import pmca\n"
        "try:\n"
        "    pmca.world.from_pmix()\n"
        "except pmca.world.LauncherError as exc:\n"
        "    print('ERROR', exc)\n"
    )
    gone = subprocess.run(
        [sys.executable, "-c", probe],
        env={**os.environ, **env},
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert "ERROR PMIx: PMIx_Init failed" in gone.stdout, gone.stdout + gone.stderr


@pytest.mark.parametrize("pmi_version", ["auto", "1"])
def test_rank_that_never_enters_the_modex(launcher: Launcher, pmca_env, tmp_path, pmi_version):
    child, reported, output = _run(
        launcher, 2, "silent", tmp_path, btl="self,tcp", pmi_version=pmi_version
    )
    lines = ok_lines(reported)
    assert lines and "modex error" in lines[0], output
    # Hydra answers PMI-2's kvs-fence at once: the get of the silent rank's entry waits.
    fence = {"PMIx": "fence", "PMI-1": "'barrier_in'", "PMI-2": "'kvs-get'"}
    assert fence[_protocol(launcher, pmi_version)] in lines[0], output
    assert child.returncode == 0, output
