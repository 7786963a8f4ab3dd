"""btl/sm under a real launcher with each way of moving large messages."""

from __future__ import annotations

import pytest

from pmca.testing import Launcher, run_mpi

from .conftest import BTL_SETS, ok_lines, program

pytestmark = [
    pytest.mark.mpi,
    pytest.mark.skipif(
        not any(btl == "self,sm" for btl, _ in BTL_SETS), reason="btl sm is not built in"
    ),
]


# cma, the default, runs in every test of test_mpirun.py
@pytest.mark.parametrize("mechanism", ["emulated", "none"])
@pytest.mark.parametrize("ranks", [2, 4])
def test_large_messages_without_cma(
    launcher: Launcher, pmca_env, mechanism: str, ranks: int
) -> None:
    child = run_mpi(
        launcher,
        ranks,
        [program("sm_mechanisms.py"), "--btl", "self,sm", "--mechanism", mechanism],
        timeout=300,
    )
    output = f"--- stdout\n{child.stdout}\n--- stderr\n{child.stderr}"
    assert child.returncode == 0, output
    assert len(ok_lines(child.stdout)) == ranks, output


@pytest.mark.parametrize("btl", ["self,sm", "self,sm,tcp"])
def test_blocking_send_recv_through_lanes_and_back(launcher: Launcher, pmca_env, btl: str) -> None:
    """Lanes carry blocking eager traffic; unexpected, posted, large, truncated, 64-bit
    tags, threads and timeouts still behave as through requests."""
    child = run_mpi(launcher, 2, [program("lanes.py"), "--btl", btl], timeout=300)
    output = f"--- stdout\n{child.stdout}\n--- stderr\n{child.stderr}"
    assert child.returncode == 0, output
    assert len(ok_lines(child.stdout)) == 2, output
