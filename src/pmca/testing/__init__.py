"""Test support for component authors: pmca's pytest plugin and helpers."""

from __future__ import annotations

from ._distributions import make_distribution
from ._launch import Launcher, find_launcher, run_mpi
from ._pair import run_pair
from ._resources import mapped_files, open_sockets
from ._slurm import SlurmCluster, slurm_requirements
from ._subprocess import run_python
from ._testbed import Host, Testbed, TestbedUnavailable
from ._testbed import requirements as testbed_requirements

__all__ = [
    "Host",
    "Launcher",
    "SlurmCluster",
    "Testbed",
    "TestbedUnavailable",
    "find_launcher",
    "make_distribution",
    "mapped_files",
    "open_sockets",
    "run_mpi",
    "run_pair",
    "run_python",
    "slurm_requirements",
    "testbed_requirements",
]
