"""Worlds: who the peers are (docs/architecture.md, section 5.1).

A world gives a session ``rank``, ``size``, ``allgather(bytes)`` and
``barrier()``. :func:`single` is the default; :func:`from_mpi` wraps an
mpi4py communicator, the normal case under ``mpirun``/``mpiexec``.

Each name is imported at first use: a session with the default world
imports only :func:`single`'s module.
"""

from __future__ import annotations

from .._lazy import lazy_attributes

TYPE_CHECKING = False  # typing.TYPE_CHECKING, without importing typing for it
if TYPE_CHECKING:
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

_TARGETS = {
    "World": "._interface:World",
    "WorldError": "._interface:WorldError",
    "WorldTimeout": "._interface:WorldTimeout",
    "MpiWorld": "._mpi:MpiWorld",
    "from_mpi": "._mpi:from_mpi",
    "PairWorld": "._pair:PairWorld",
    "SingleWorld": "._single:SingleWorld",
    "single": "._single:single",
}

if not TYPE_CHECKING:  # mypy sees the imports above, and no catch-all
    __getattr__, __dir__ = lazy_attributes(__name__, _TARGETS)
