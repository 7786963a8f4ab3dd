"""Slurm's programs on this machine: found, or installed from Debian's packages.

The cluster of :mod:`._slurm` runs the distribution's own Slurm (``slurm-wlm``,
22.05 on Debian 12), MUNGE for its authentication, and ``libpmix-dev``: Slurm's
PMIx plugin loads the unversioned ``libpmix.so`` that only the development
package ships (without it ``srun --mpi=pmix`` says "can not load PMIx library").
What is missing is installed once per machine with ``apt-get`` (root only);
after that the check is a few ``stat`` calls. Where it cannot be installed the
reason is returned, for a skip message: never a silent skip.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sysconfig
from pathlib import Path

#: Debian's packages that make a Slurm cluster with both PMI plugins.
PACKAGES = ("slurm-wlm", "munge", "libpmix-dev")
#: The programs the cluster runs, each from one of :data:`PACKAGES`.
PROGRAMS = ("munged", "slurmctld", "slurmd", "srun", "sinfo", "scontrol")
_MULTIARCH = sysconfig.get_config_var("MULTIARCH") or "x86_64-linux-gnu"
#: The library Slurm's PMIx plugin loads (OpenPMIx 4 in Debian 12).
PMIX_LIBRARY = Path(f"/usr/lib/{_MULTIARCH}/pmix2/lib/libpmix.so")

_answer: list[str | None] = []  # the first check's answer, for the life of the process


def missing() -> list[str]:
    """What of Slurm, MUNGE and the PMIx library is not on this machine."""
    absent = [program for program in PROGRAMS if _which(program) is None]
    if not PMIX_LIBRARY.exists():
        absent.append(str(PMIX_LIBRARY))
    return absent


def _which(program: str) -> str | None:
    # slurmctld/slurmd/munged live in sbin, which a non-login PATH may lack.
    return shutil.which(program, path=f"{os.environ.get('PATH', '')}:/usr/sbin:/sbin")


def program(name: str) -> str:
    """The path of one of :data:`PROGRAMS` (installed: see :func:`ensure`)."""
    found = _which(name)
    if found is None:
        raise FileNotFoundError(f"{name} is not installed (Debian package of {PACKAGES})")
    return found


def ensure(*, install: bool = True) -> str | None:
    """Make Slurm ready on this machine; ``None`` when it is, else why not.

    ``install=False`` only checks. The answer of the first call that found
    everything (or that failed to install) is kept for the process.
    """
    if _answer:
        return _answer[0]
    absent = missing()
    if not absent:
        _answer.append(None)
        return None
    if not install:
        return f"Slurm is not installed here (missing: {', '.join(absent)})"
    why = _install(absent)
    _answer.append(why)
    return why


def _install(absent: list[str]) -> str | None:
    if os.geteuid() != 0:
        return (
            f"Slurm is not installed (missing: {', '.join(absent)}) and only root may "
            f"install Debian's {' '.join(PACKAGES)}"
        )
    if shutil.which("apt-get") is None:
        return (
            f"Slurm is not installed (missing: {', '.join(absent)}) and this machine has "
            f"no apt-get to install Debian's {' '.join(PACKAGES)}"
        )
    env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
    command = ["apt-get", "install", "--yes", "--quiet", "--no-install-recommends", *PACKAGES]
    done = subprocess.run(command, env=env, capture_output=True, text=True, check=False)
    if done.returncode != 0 and "Unable to locate package" in done.stderr:
        # A fresh machine has no package lists yet: fetch them once, then retry.
        subprocess.run(["apt-get", "update", "--quiet"], env=env, capture_output=True, check=False)
        done = subprocess.run(command, env=env, capture_output=True, text=True, check=False)
    still = missing()
    if done.returncode != 0 or still:
        tail = (done.stderr or done.stdout).strip().splitlines()[-3:]
        return (
            f"installing Debian's {' '.join(PACKAGES)} failed (exit {done.returncode}; "
            f"still missing: {', '.join(still) or 'nothing'}): {' / '.join(tail)}"
        )
    return None


__all__ = ["PACKAGES", "PMIX_LIBRARY", "PROGRAMS", "ensure", "missing", "program"]
