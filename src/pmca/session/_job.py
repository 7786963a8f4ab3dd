"""Which job and rank this process is, from its launcher's environment (no imports)."""

from __future__ import annotations

import os
from collections.abc import Mapping

__all__ = ["job_identity", "wanted"]


def job_identity(env: Mapping[str, str]) -> tuple[str, int] | None:
    """``(job, rank)`` from the launcher's environment, or ``None`` outside a job."""
    if "PMIX_NAMESPACE" in env and "PMIX_RANK" in env:
        return env["PMIX_NAMESPACE"], int(env["PMIX_RANK"])
    if "SLURM_JOB_ID" in env and "SLURM_PROCID" in env:
        step = env.get("SLURM_STEP_ID", "0")
        return f"slurm-{env['SLURM_JOB_ID']}.{step}", int(env["SLURM_PROCID"])
    if "PMI_RANK" in env:  # Hydra: the ranks of a host share their proxy
        return f"pmi-{os.getppid()}", int(env["PMI_RANK"])
    return None


def wanted(setting: str, env: Mapping[str, str]) -> bool:
    return setting == "on" or (setting == "auto" and job_identity(env) is not None)
