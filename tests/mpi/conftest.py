"""Tests under a real launcher: the one installed in this environment (Open MPI or MPICH)."""

from __future__ import annotations

import os
import re
from pathlib import Path

import pytest

from pmca.btl import FRAMEWORK
from pmca.testing import Launcher, find_launcher

PROGRAMS = Path(__file__).parent / "programs"

#: The btl sets every data-path test runs with, and what must reach another
#: rank on this host first. sm joins as soon as it is a built-in component.
_HAS_SM = any(ref.name == "sm" for ref in FRAMEWORK.static_components)
BTL_SETS = [("self,tcp", "tcp")] + (
    [("self,sm", "sm"), ("self,sm,tcp", "sm,tcp")] if _HAS_SM else []
)


@pytest.fixture(scope="session")
def launcher() -> Launcher:
    found = find_launcher()
    if found is None:
        if os.environ.get("CI"):
            pytest.fail("no MPI launcher in this environment (install pmca[mpi] or mpich)")
        pytest.skip("no MPI launcher in this environment (install pmca[mpi] or mpich)")
    return found


def program(name: str) -> str:
    return str(PROGRAMS / name)


def ok_lines(stdout: str) -> list[str]:
    """Every ``OK rank N`` report, also when the launcher forwarded two ranks'
    lines without the newline between them (Hydra writes each rank's output
    as it reads it, so a report and its newline can be split by another's)."""
    reports = (part for line in stdout.splitlines() for part in _REPORT.split(line))
    return [part for part in reports if part.startswith("OK rank")]


_REPORT = re.compile(r"(?=(?:OK|FAIL) rank \d)")
