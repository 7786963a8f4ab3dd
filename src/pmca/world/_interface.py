"""What a world is: the processes a session exchanges addresses with."""

from __future__ import annotations

from typing import Protocol, runtime_checkable

from ..mca._errors import PmcaError


class WorldError(PmcaError):
    """A world operation failed or timed out; names the ranks concerned."""


class WorldTimeout(WorldError):
    """Some peers never answered within the timeout. ``missing`` lists them."""

    def __init__(self, message: str, *, missing: list[int]) -> None:
        super().__init__(message)
        self.missing = missing


@runtime_checkable
class World(Protocol):
    """The processes of one job, as pmca sees them (docs/architecture.md, section 5.1).

    pmca never launches processes: a launcher does, and a world wraps what
    it provides (an mpi4py communicator, or nothing at all for one process).
    """

    #: This process's rank, ``0 <= rank < size``.
    rank: int
    #: Number of processes.
    size: int
    #: A short description used in messages (``"mpi4py COMM_WORLD (Open MPI)"``).
    description: str

    def allgather(self, data: bytes, *, timeout: float | None = None) -> list[bytes]:
        """Every rank's ``data``, indexed by rank.

        With ``timeout`` (seconds), raises :class:`WorldTimeout` naming the
        ranks whose data had not arrived by then, instead of waiting forever.
        """
        ...

    def barrier(self, *, timeout: float | None = None) -> None:
        """Return once every rank has entered; :class:`WorldTimeout` after ``timeout``."""
        ...
