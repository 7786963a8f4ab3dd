"""btl self,ofi under a real ``mpirun -n 2``, once per working provider, both load modes.

Each rank pair moves 0 B ... 64 MiB through pmca's p2p over the ofi module
(eager and rendezvous), then puts and gets 4 MiB + 123 B through
``fi_write``/``fi_read`` into each other's ``fi_mr_regattr`` registrations,
and compares checksums. Open MPI itself only provides the launcher and the
modex (mpi4py's COMM_WORLD): its own transports are kept to ob1/tcp, and
UCX's memory hooks, which would take libc's prologues first, are off.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from pmca.testing import Launcher, find_launcher, run_mpi

PROGRAM = Path(__file__).with_name("_ranks.py")
PROVIDERS = ["tcp;ofi_rxm", "shm", "sockets", "udp;ofi_rxd"]


@pytest.fixture(scope="module")
def launcher() -> Launcher:
    found = find_launcher()
    if found is None:
        pytest.skip("no MPI launcher in this environment (pip install 'pmca[mpi]')")
    try:
        import mpi4py  # noqa: F401
    except ImportError:
        pytest.skip("mpi4py is not installed (pip install 'pmca[mpi]')")
    return found


#: Open MPI (there only for the launch and the modex) keeps to ob1/tcp; UCX,
#: loaded with libmpi, leaves libc's prologues to pmca's hooks.
LAUNCH_ENVIRONMENT = {
    "OMPI_MCA_pml": "ob1",
    "OMPI_MCA_btl": "self,tcp",
    "OMPI_MCA_mtl": "^ofi",
    "UCX_MEM_MMAP_HOOK_MODE": "none",
}


@pytest.mark.mpi
@pytest.mark.parametrize("provider", PROVIDERS)
def test_self_ofi_between_two_ranks(
    libfabric: None, launcher: Launcher, provider: str, pmca_load_mode: str
) -> None:
    child = run_mpi(launcher, 2, [str(PROGRAM), provider], timeout=240, env=LAUNCH_ENVIRONMENT)
    assert child.returncode == 0, child.stdout[-3000:] + child.stderr[-3000:]
    reports = [
        json.loads(line[len("RESULT ") :])
        for line in child.stdout.splitlines()
        if line.startswith("RESULT ")
    ]
    assert sorted(r["rank"] for r in reports) == [0, 1], child.stdout
    for report in reports:
        assert report["provider"] == provider
        assert report["reach"] == ["ofi"]
        assert report["load_mode"] == [pmca_load_mode]
        assert report["sizes"] == [0, 1, 4095, 16384, 65539, 1 << 20, 64 << 20]
        assert report["rma"] == {"completed": True, "put_landed": True, "get_read": True}
        assert report["support"] & 0x3 == 0x3  # FREE|MUNMAP: activated by ofi's selection
        assert report["monitor"]  # pmca's hooks imported as libfabric's memory monitor
        assert report["cached"]  # fi_mr_regattr registrations live in the rcache


@pytest.mark.mpi
@pytest.mark.parametrize("ranks", [2, 4])
def test_wildcard_server_over_ofi(libfabric: None, launcher: Launcher, ranks: int) -> None:
    wildcards = Path(__file__).parents[1] / "mpi" / "programs" / "wildcards.py"
    env = {**LAUNCH_ENVIRONMENT, "PMCA_MCA_btl_ofi_provider_include": "tcp;ofi_rxm"}
    child = run_mpi(
        launcher,
        ranks,
        [str(wildcards), "--btl", "self,ofi", "--count", "30"],
        timeout=300,
        env=env,
    )
    assert child.returncode == 0, child.stdout[-3000:] + child.stderr[-3000:]
    assert sum(line.startswith("OK rank") for line in child.stdout.splitlines()) == ranks
