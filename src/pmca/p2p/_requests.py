"""Requests: what isend/irecv return."""

from __future__ import annotations

from collections import deque
from collections.abc import Callable
from typing import Any, Protocol, TypeVar

from ..btl import BtlError

T = TypeVar("T")


class Progress(Protocol):
    """What a request needs of the engine that made it (:class:`P2p`)."""

    def progress(self) -> int: ...

    def wait_for(
        self,
        condition: Callable[[], bool] | None,
        timeout: float | None,
        request: Request | None = None,
    ) -> None: ...


class TruncationError(BtlError):
    """A message was larger than the receive buffer (MPI_ERR_TRUNCATE)."""


def take_first(queues: dict[tuple[int, int], deque[T]], key: tuple[int, int]) -> T:
    """The first of the ``key`` stream's queued entries, dropping the queue once empty."""
    queue = queues[key]
    first = queue.popleft()
    if not queue:
        del queues[key]
    return first


def truncation(size: int, source: int, tag: int, capacity: int) -> TruncationError:
    """The error of a receive whose ``capacity``-byte buffer is too small for ``size`` bytes."""
    return TruncationError(
        f"message of {size} bytes from rank {source} tag {tag} does not fit "
        f"the {capacity}-byte receive buffer"
    )


class Request:
    """A pending send or receive; ``wait()`` returns the bytes transferred."""

    __slots__ = ("_engine", "cleanup", "done", "error", "kind", "nbytes", "peer", "tag", "view")

    def __init__(self, engine: Progress, kind: str, peer: int, tag: int, view: memoryview) -> None:
        self._engine = engine
        self.kind = kind
        self.peer = peer
        self.tag = tag
        self.view = view
        self.done = False
        self.error: BaseException | None = None
        self.nbytes = 0
        self.cleanup: list[Callable[[], Any]] = []

    def complete(self, nbytes: int, error: BaseException | None = None) -> None:
        if self.done:
            return
        self.done = True
        self.nbytes = nbytes
        self.error = error
        cleanup, self.cleanup = self.cleanup, []
        for action in cleanup:
            action()

    def finished(self) -> bool:
        """``done``, as a callable (for waits on several conditions)."""
        return self.done

    def test(self) -> bool:
        """Make progress once; ``True`` when the request has finished."""
        if not self.done:
            self._engine.progress()
        return self.done

    def wait(self, timeout: float | None = None) -> int:
        """Block until done; return the bytes sent or received, or raise its error."""
        if not self.done:
            self._engine.wait_for(None, timeout, self)
        if self.error is not None:
            raise self.error
        return self.nbytes

    def describe(self) -> str:
        direction = "to" if self.kind == "send" else "from"
        return (
            f"{self.kind} of {self.view.nbytes} bytes {direction} rank {self.peer} tag {self.tag}"
        )

    def __repr__(self) -> str:
        state = "done" if self.done else "pending"
        return f"<pmca p2p request: {self.describe()}, {state}>"
