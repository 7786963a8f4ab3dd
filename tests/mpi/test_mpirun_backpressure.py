"""Back-pressure under a real launcher: a receiver that stops reading holds its sender back."""

from __future__ import annotations

import pytest

from pmca.testing import Launcher, run_mpi

from .conftest import BTL_SETS, ok_lines, program

pytestmark = pytest.mark.mpi

#: One rank reaches the other through these (self,sm,tcp would use sm alone).
_SETS = [btl for btl, _ in BTL_SETS if btl != "self,sm,tcp"]


@pytest.mark.parametrize("btl", _SETS)
def test_a_receiver_that_stops_reading(launcher: Launcher, pmca_env, btl: str) -> None:
    child = run_mpi(launcher, 2, [program("backpressure.py"), "--btl", btl], timeout=300)
    output = f"--- stdout\n{child.stdout}\n--- stderr\n{child.stderr}"
    assert child.returncode == 0, output
    assert len(ok_lines(child.stdout)) == 2, output
