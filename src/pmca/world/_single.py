"""The world of one process, the default."""

from __future__ import annotations

from attrs import define

from .._public import public
from .._records import Record
from ._interface import DEFAULT_TIMEOUT, Closing


@public
@define(eq=False, repr=False)
class SingleWorld(Record, Closing):
    """Rank 0 of 1: the modex is this process's own data (its collectives never wait)."""

    rank: int = 0
    size: int = 1
    description: str = "single process"
    timeout: float = DEFAULT_TIMEOUT

    def allgather(self, data: bytes, *, timeout: float | None = None) -> list[bytes]:
        return [bytes(data)]

    def barrier(self, *, timeout: float | None = None) -> None:
        return None


@public
def single() -> SingleWorld:
    """The world of this process alone (``rank`` 0, ``size`` 1)."""
    return SingleWorld()
