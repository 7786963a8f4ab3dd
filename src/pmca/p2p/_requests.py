"""Requests: what isend/irecv return."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Protocol

from attrs import frozen

from .._public import public
from ..btl import BtlError
from ._checks import check_timeout
from ._protocol import STATUS_OK, STATUS_TRUNCATED


class Progress(Protocol):
    """What a request needs of the engine that made it (:class:`P2p`)."""

    def progress(self) -> int: ...

    def wait_for(
        self,
        condition: Callable[[], bool] | None,
        timeout: float | None,
        request: Request | None = None,
    ) -> None: ...

    def cancel_receive(self, request: Request) -> bool: ...


@public
class TruncationError(BtlError):
    """A message was larger than the receive buffer (MPI_ERR_TRUNCATE)."""


def truncation(size: int, source: int, tag: int, capacity: int) -> TruncationError:
    """The error of a receive whose ``capacity``-byte buffer is too small for ``size`` bytes."""
    return TruncationError(
        f"message of {size} bytes from rank {source} tag {tag} does not fit "
        f"the {capacity}-byte receive buffer"
    )


def fin_error(source: int, status: int, tag: int, nbytes: int) -> BaseException | None:
    """What a rendezvous send of ``nbytes`` with ``tag`` ends with, from its FIN's status."""
    if status == STATUS_OK:
        return None
    if status == STATUS_TRUNCATED:
        return TruncationError(
            f"rank {source}'s receive buffer for tag {tag} is smaller than the "
            f"{nbytes}-byte message"
        )
    return BtlError(f"rank {source} failed to read the {nbytes}-byte message")


@public
@frozen
class Status:
    """What a finished receive (or a probe) learned about its message (MPI_Status).

    ``source`` and ``tag`` are the message's own, also when the receive named
    :data:`~pmca.p2p.ANY_SOURCE` or :data:`~pmca.p2p.ANY_TAG`; ``count`` is
    its size in bytes; ``error`` the exception the request finished with, or
    ``None``; ``cancelled`` whether :meth:`Request.cancel` withdrew it.
    """

    source: int
    tag: int
    count: int
    error: BaseException | None = None
    cancelled: bool = False


@public
class Request:
    """A pending send or receive; ``wait()`` returns the bytes transferred.

    A receive's ``peer`` and ``tag`` are what it was posted with until a
    message matches it, then that message's source and tag.
    """

    __slots__ = (
        "_engine",
        "cancelled",
        "cleanup",
        "done",
        "error",
        "kind",
        "nbytes",
        "order",
        "peer",
        "tag",
        "view",
    )

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
        self.order = 0  # the posting number (matching)
        self.cancelled = False

    @property
    def engine(self) -> Progress:
        """The p2p engine (session) the request belongs to."""
        return self._engine

    @property
    def source(self) -> int:
        """The rank a receive takes from (``peer``; matching reads it by this name)."""
        return self.peer

    @property
    def status(self) -> Status | None:
        """The :class:`Status` once the request finished, else ``None``."""
        if not self.done:
            return None
        return Status(self.peer, self.tag, self.nbytes, self.error, self.cancelled)

    def cancel(self) -> bool:
        """Withdraw a receive no message has matched yet (MPI_Cancel); ``True`` if withdrawn.

        A withdrawn receive finishes at once: ``wait()`` returns 0 and
        ``status.cancelled`` is true. A receive already matched finishes as
        usual. Sends are never withdrawn (``False``): an eager send is
        complete once queued, and a rendezvous header may sit in the
        receiver's unexpected queue holding the sender's buffer.
        """
        if self.done or self.kind != "recv":
            return False
        return self._engine.cancel_receive(self)

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
        """Make progress once; ``True`` when the request has finished (never raises its error)."""
        if not self.done:
            self._engine.progress()
        return self.done

    def wait(self, timeout: float | None = None) -> int:
        """Block until done; return the bytes sent or received, or raise its error.

        :class:`TimeoutError` after ``timeout`` seconds (``None``: no limit).
        """
        if timeout is not None:
            timeout = check_timeout(timeout, "p2p wait")
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
