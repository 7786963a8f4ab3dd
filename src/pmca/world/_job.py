"""Which job and rank this process is, from its launcher's environment (no imports)."""

from __future__ import annotations

import os
from collections.abc import Mapping

__all__ = ["hydra_proxy", "job_identity", "job_words", "wanted"]


def job_identity(env: Mapping[str, str]) -> tuple[str, int] | None:
    """``(job, rank)`` from the launcher's environment, or ``None`` outside a job."""
    if "PMIX_NAMESPACE" in env and "PMIX_RANK" in env:
        return env["PMIX_NAMESPACE"], int(env["PMIX_RANK"])
    if "SLURM_JOB_ID" in env and "SLURM_PROCID" in env:
        step = env.get("SLURM_STEP_ID", "0")
        return f"slurm-{env['SLURM_JOB_ID']}.{step}", int(env["SLURM_PROCID"])
    if "PMI_RANK" in env:  # Hydra: the ranks of a host share their proxy
        return f"pmi-{hydra_proxy() or os.getppid()}", int(env["PMI_RANK"])
    return None


def job_words(own: str, kind: str, env: Mapping[str, str] | None = None) -> tuple[str, str]:
    """The job's one name, and the words a launcher world's description gives it.

    The one name is the one pmca's tools use: the live view's socket is
    named after it and ``pmca stats --job`` finds it from a rank's
    environment (:func:`job_identity`). A launcher's own name for the job
    (``own``: Hydra's kvs name, a PMI-2 or PMIx job id) follows it as
    ``kind own`` where the two differ; the live view answers to both.
    """
    identity = job_identity(os.environ if env is None else env)
    job = identity[0] if identity else own
    return job, (f"job {job}" if job == own else f"job {job}, {kind} {own}")


#: Hydra's per-host proxy, as the kernel names it (``comm``: 15 characters at most).
_PROXY = b"hydra_pmi_proxy"


def hydra_proxy(pid: int | None = None, limit: int = 64) -> int | None:
    """The nearest ancestor of ``pid`` (default: this process) that is Hydra's proxy.

    Hydra passes its ranks no job name, only ``PMI_*`` variables; the proxy
    that started the ranks of this host is what they have in common, and a
    tool a rank starts (``pmca stats --job``) finds it too, a level deeper.
    """
    pid = os.getpid() if pid is None else pid
    for _ in range(limit):
        try:
            with open(f"/proc/{pid}/stat", "rb") as stat:
                line = stat.read()
        except OSError:
            return None
        # "pid (comm) state ppid ...": comm may hold spaces and parentheses.
        close = line.rfind(b")")
        if line[line.find(b"(") + 1 : close] == _PROXY:
            return pid
        parent = int(line[close + 2 :].split()[1])
        if parent <= 1:
            return None
        pid = parent
    return None


def wanted(setting: str, env: Mapping[str, str]) -> bool:
    return setting == "on" or (setting == "auto" and job_identity(env) is not None)
