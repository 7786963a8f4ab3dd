"""Worlds: who the peers are (ARCHITECTURE.md §7.1).

A world gives a session ``rank``, ``size``, ``allgather(bytes)`` and
``barrier()``. :func:`single` is the default; :func:`from_mpi` wraps an
mpi4py communicator, the normal case under ``mpirun``/``mpiexec``.
"""

from __future__ import annotations

from ._interface import World, WorldError, WorldTimeout
from ._mpi import MpiWorld, from_mpi
from ._pair import PairWorld
from ._single import SingleWorld, single

__all__ = [
    "MpiWorld",
    "PairWorld",
    "SingleWorld",
    "World",
    "WorldError",
    "WorldTimeout",
    "from_mpi",
    "single",
]
