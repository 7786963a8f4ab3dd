"""``run_mpi`` gives every launch its own ``TMPDIR``, so files a killed launcher
left behind cannot refuse a later launch that happens to reuse its pid."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
from pathlib import Path

import pytest

from pmca.testing import Launcher, run_mpi
from pmca.testing._namespaces import running, stat_fields
from tests._matrix import once_per_matrix

# What run_mpi does with a launcher depends on neither the load mode nor the interpreter.
pytestmark = [pytest.mark.mpi, once_per_matrix()]

#: How many of the next pids are poisoned: far more than the processes this
#: machine starts between poisoning them and launching.
AHEAD = 5000

_SHOW_TMPDIR = "import os, sys; sys.stdout.write(os.environ['TMPDIR'] + '\\n')"


def _poison_next_pids(tmpdir: Path) -> None:
    """Leave what a killed Open MPI launcher leaves, for each of the next pids."""
    last = int(Path("/proc/sys/kernel/ns_last_pid").read_text())
    pid_max = int(Path("/proc/sys/kernel/pid_max").read_text())
    hostname = socket.gethostname()
    for n in range(1, AHEAD + 1):
        pid = last + n if last + n < pid_max else 300 + (last + n - pid_max)  # pids wrap to 300
        session = tmpdir / f"ompi.{pid}"
        session.mkdir(exist_ok=True)
        (session / f"pmix.{hostname}.tool").write_text("left by a launcher that was killed\n")


def test_a_launch_starts_where_a_killed_launcher_left_its_files(
    launcher: Launcher, pmca_env, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    if launcher.name != "openmpi":
        pytest.skip("Open MPI's launcher keeps session files named after its pid; Hydra does not")
    poisoned = tmp_path / "tmp"
    poisoned.mkdir()
    _poison_next_pids(poisoned)
    argv = ["-c", _SHOW_TMPDIR]

    # The hazard itself: the launcher refuses to start in that directory.
    refused = run_mpi(launcher, 1, argv, env={"TMPDIR": str(poisoned)})
    assert refused.returncode != 0, (
        "Open MPI's launcher started over another launcher's session files: "
        f"this test's premise no longer holds\n{refused.stdout}{refused.stderr}"
    )
    assert "listener thread failed to start" in refused.stderr, refused.stderr

    monkeypatch.setenv("TMPDIR", str(poisoned))
    _poison_next_pids(poisoned)  # the pids the refused launch used are behind us
    child = run_mpi(launcher, 2, argv)
    assert child.returncode == 0, child.stdout + child.stderr
    used = {Path(line) for line in child.stdout.split()}
    assert len(used) == 1, child.stdout
    (scratch,) = used
    assert not scratch.is_relative_to(poisoned), scratch
    assert not scratch.exists(), f"{scratch} outlived the launch"


def test_a_launch_that_hangs_leaves_no_rank_and_no_scratch_directory(
    launcher: Launcher, pmca_env, tmp_path: Path
) -> None:
    marker = tmp_path / "rank"
    hang = (
        "import os, time; "
        f"open({str(marker)!r}, 'w').write(f\"{{os.getpid()}} {{os.environ['TMPDIR']}}\"); "
        "time.sleep(120)"
    )
    with pytest.raises(subprocess.TimeoutExpired):
        run_mpi(launcher, 1, ["-c", hang], timeout=8)  # the rank starts within ~1 s
    pid, scratch = marker.read_text().split(" ", 1)
    if running(stat_fields(int(pid))):
        os.kill(int(pid), signal.SIGKILL)
        pytest.fail(f"rank {pid} outlived the launch that was killed")
    assert Path(scratch).name.startswith("pmca-"), scratch
    assert not Path(scratch).exists(), f"{scratch} outlived the launch that was killed"
