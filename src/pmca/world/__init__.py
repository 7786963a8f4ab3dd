"""Worlds: who the peers are (docs/architecture.md, section 5.1).

A world gives a session ``rank``, ``size``, ``allgather(bytes)`` and
``barrier()``. :func:`single` is the default; :func:`from_mpi` wraps an
mpi4py communicator; :func:`from_pmix` and :func:`from_pmi` ask the
launcher itself (``mpirun``'s PMIx server, ``mpiexec``'s PMI-2 or PMI-1), with no MPI
initialized; :func:`from_launcher` picks whichever the environment offers.

Each name is imported at first use: a session with the default world
imports only :func:`single`'s module.
"""

from __future__ import annotations

from .._lazy import lazy_attributes

TYPE_CHECKING = False  # typing.TYPE_CHECKING, without importing typing for it
if TYPE_CHECKING:
    from ._interface import (
        DEFAULT_TIMEOUT,
        LauncherError,
        LauncherWorld,
        Locality,
        PeerNotice,
        World,
        WorldError,
        WorldTimeout,
    )
    from ._launcher import from_launcher
    from ._mpi import MpiWorld, from_mpi
    from ._pair import PairWorld
    from ._pmi import Pmi1World, from_pmi
    from ._pmi2 import Pmi2World
    from ._pmi_base import PmiWorld
    from ._pmix import PmixWorld, from_pmix
    from ._single import SingleWorld, single

__all__ = [
    "DEFAULT_TIMEOUT",
    "LauncherError",
    "LauncherWorld",
    "Locality",
    "MpiWorld",
    "PairWorld",
    "PeerNotice",
    "Pmi1World",
    "Pmi2World",
    "PmiWorld",
    "PmixWorld",
    "SingleWorld",
    "World",
    "WorldError",
    "WorldTimeout",
    "from_launcher",
    "from_mpi",
    "from_pmi",
    "from_pmix",
    "single",
]

_TARGETS = {
    "DEFAULT_TIMEOUT": "._interface:DEFAULT_TIMEOUT",
    "World": "._interface:World",
    "WorldError": "._interface:WorldError",
    "WorldTimeout": "._interface:WorldTimeout",
    "LauncherError": "._interface:LauncherError",
    "LauncherWorld": "._interface:LauncherWorld",
    "Locality": "._interface:Locality",
    "PeerNotice": "._interface:PeerNotice",
    "from_launcher": "._launcher:from_launcher",
    "PmiWorld": "._pmi_base:PmiWorld",
    "Pmi1World": "._pmi:Pmi1World",
    "Pmi2World": "._pmi2:Pmi2World",
    "from_pmi": "._pmi:from_pmi",
    "PmixWorld": "._pmix:PmixWorld",
    "from_pmix": "._pmix:from_pmix",
    "MpiWorld": "._mpi:MpiWorld",
    "from_mpi": "._mpi:from_mpi",
    "PairWorld": "._pair:PairWorld",
    "SingleWorld": "._single:SingleWorld",
    "single": "._single:single",
}

if not TYPE_CHECKING:  # mypy sees the imports above, and no catch-all
    __getattr__, __dir__ = lazy_attributes(__name__, _TARGETS)
