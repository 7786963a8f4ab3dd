"""What a world is: the processes a session exchanges addresses with."""

from __future__ import annotations

import math
from typing import (
    TYPE_CHECKING,
    NamedTuple,
    Protocol,
    SupportsFloat,
    TypeGuard,
    runtime_checkable,
)

from .._public import public
from ..mca._errors import PmcaError

if TYPE_CHECKING:
    from types import TracebackType

    from typing_extensions import Self

#: Seconds a world collective waits at most when neither the call nor the
#: world names a bound: ``pmca_base_modex_timeout``'s default (a session
#: gives the worlds it builds that parameter's value).
DEFAULT_TIMEOUT = 60.0


@public
class WorldError(PmcaError):
    """A world operation failed or timed out; names the ranks concerned."""


@public
class LauncherError(WorldError):
    """The launcher's protocol (PMIx, PMI) failed: names the protocol and the step."""


@public
class WorldTimeout(WorldError):
    """Some peers never answered within the timeout. ``missing`` lists them."""

    def __init__(self, message: str, *, missing: list[int]) -> None:
        super().__init__(message)
        self.missing = missing


@public
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

        Raises :class:`WorldTimeout` naming the ranks whose data had not
        arrived after ``timeout`` seconds (pmca's worlds: ``None`` is the
        world's own bound, :data:`DEFAULT_TIMEOUT` unless it was built with
        another), instead of waiting forever.
        """
        ...

    def barrier(self, *, timeout: float | None = None) -> None:
        """Return once every rank has entered; :class:`WorldTimeout` after ``timeout``."""
        ...


class Closing:
    """What pmca's worlds share: a bound for their collectives, and closing.

    A world is a context manager: ``with pmca.world.from_launcher() as w:``
    closes it at the end of the block. ``timeout`` is the bound a collective
    called without one waits (seconds).
    """

    __slots__ = ()

    timeout: float

    def close(self) -> None:
        """Release what the world holds (idempotent); it is unusable afterwards."""

    def __enter__(self) -> Self:
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        trace: TracebackType | None,
    ) -> None:
        self.close()

    def _bound(self, timeout: float | None, what: str) -> float:
        """The seconds ``what`` (a collective) waits: ``timeout``, else the world's."""
        return self.timeout if timeout is None else checked_timeout(timeout, what)


def _real(value: object) -> TypeGuard[SupportsFloat]:
    """Whether ``value`` is a real number (never a bool)."""
    if type(value) in (int, float):
        return True
    import numbers  # only for other kinds of numbers: most starts never import it

    return not isinstance(value, bool) and isinstance(value, numbers.Real)


def checked_timeout(timeout: object, what: str) -> float:
    """``timeout`` as seconds (more than 0, finite), or an error naming ``what``."""
    if not _real(timeout):
        raise TypeError(f"{what}: timeout {timeout!r} is a {type(timeout).__name__}, not seconds")
    try:
        seconds = float(timeout)
    except OverflowError:  # an int beyond any float, refused as p2p's timeouts refuse it
        seconds = math.inf
    if not 0.0 < seconds < math.inf:  # NaN fails both comparisons
        raise ValueError(f"{what}: timeout {timeout!r} is not a finite number of seconds > 0")
    return seconds


@public
class Locality(NamedTuple):
    """Where the ranks run, as the launcher knows it (not guessed from the modex).

    The bml takes it, when a world offers it, to decide which peers share
    this host (and so can be reached through shared memory).
    """

    #: The host name of every rank, by rank.
    hosts: tuple[str, ...]
    #: The ranks on this process's host, this process included.
    local: frozenset[int]


@public
class PeerNotice(NamedTuple):
    """The launcher reported that a rank failed."""

    rank: int
    #: What the launcher said (``"PMIX_ERR_PROC_ABORTED_BY_SIG"``).
    reason: str
    #: ``time.monotonic()`` when the notice reached this process.
    when: float


@public
@runtime_checkable
class LauncherWorld(World, Protocol):
    """A world served by the launcher itself (PMIx, PMI): everything a world
    does, plus what only a launcher knows, and a close that ends the client.
    """

    def locality(self) -> Locality | None:
        """The launcher's placement of every rank, or ``None`` if it gives none."""
        ...

    def notice_fd(self) -> int | None:
        """A file descriptor readable when :meth:`peer_notices` has news, or ``None``."""
        ...

    def peer_notices(self) -> list[PeerNotice]:
        """The failures reported since the last call (never blocks)."""
        ...

    def close(self) -> None:
        """End the launcher client (idempotent); the world is unusable afterwards."""
        ...
