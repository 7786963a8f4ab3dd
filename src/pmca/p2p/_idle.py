"""Whether a waiting rank gives up its core while it polls (``mpi_yield_when_idle``).

Open MPI's ranks poll their transports without pause; when a node runs more
ranks than it has cores, each poll steals time from the rank that would
answer, so Open MPI yields the processor between polls there. pmca does the
same: ``auto`` yields when this host runs more ranks of the world than the
cores the job may use.
"""

from __future__ import annotations

import os
from pathlib import Path

_CPUSET = Path("/sys/fs/cgroup/cpuset.cpus.effective")


def host_cores() -> int:
    """Cores the processes of this job may share on this host.

    Not this process's affinity: a launcher that binds each rank to one
    core would make every two-rank job look oversubscribed. The cgroup's
    cpuset bounds what a container may use; the online count otherwise.
    """
    try:
        return max(1, _count_cpus(_CPUSET.read_text()))
    except (OSError, ValueError):
        return max(1, os.cpu_count() or 1)


def _count_cpus(cpulist: str) -> int:
    count = 0
    for part in cpulist.strip().split(","):
        if not part:
            continue
        first, _, last = part.partition("-")
        count += int(last or first) - int(first) + 1
    return count


def should_yield(setting: int, local_ranks: int) -> bool:
    """``mpi_yield_when_idle`` (-1 auto, 0 false, 1 true) for ``local_ranks`` on this host."""
    if setting >= 0:
        return bool(setting)
    return local_ranks > host_cores()


__all__ = ["host_cores", "should_yield"]
