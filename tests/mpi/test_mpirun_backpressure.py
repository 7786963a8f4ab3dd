"""Back-pressure under a real launcher: a receiver that stops reading holds its sender back."""

from __future__ import annotations

import pytest

from pmca.testing import Launcher, run_mpi

from .conftest import ok_lines, program

pytestmark = pytest.mark.mpi


@pytest.mark.parametrize("btl", ["self,tcp", "self,sm"])
def test_a_receiver_that_stops_reading(launcher: Launcher, pmca_env, btl: str) -> None:
    child = run_mpi(launcher, 2, [program("backpressure.py"), "--btl", btl], timeout=300)
    output = f"--- stdout\n{child.stdout}\n--- stderr\n{child.stderr}"
    assert child.returncode == 0, output
    assert len(ok_lines(child.stdout)) == 2, output
