"""Waiting on several requests at once (MPI_Waitany, MPI_Waitall, MPI_Testany, MPI_Testall).

Requests may come from different sessions: each session's engine makes
progress in turn.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING

from .._public import public
from ._checks import check_timeout

if TYPE_CHECKING:
    from ._requests import Progress, Request

#: How long one engine waits before the next one's turn, when requests span sessions.
_TURN = 0.001


def _engines(requests: Sequence[Request]) -> list[Progress]:
    engines: dict[int, Progress] = {}
    for request in requests:
        engine = request.engine
        engines.setdefault(id(engine), engine)
    return list(engines.values())


def _first_done(requests: Sequence[Request]) -> int | None:
    for index, request in enumerate(requests):
        if request.done:
            return index
    return None


def _wait(
    requests: Sequence[Request], timeout: float | None, condition: Callable[[], bool]
) -> None:
    engines = _engines(requests)
    deadline = None if timeout is None else time.monotonic() + timeout
    if len(engines) == 1:
        engines[0].wait_for(condition, timeout)
        return
    while not condition():
        for engine in engines:
            with contextlib.suppress(TimeoutError):
                engine.wait_for(condition, _TURN)
        if deadline is not None and time.monotonic() > deadline and not condition():
            raise TimeoutError(f"none of {len(requests)} requests finished within {timeout:g} s")


@public
def test_any(requests: Sequence[Request]) -> int | None:
    """Make progress once; the index of a finished request (the first), or ``None``."""
    if not requests:
        raise ValueError("test_any needs at least one request")
    index = _first_done(requests)
    if index is not None:
        return index
    for engine in _engines(requests):
        engine.progress()
    return _first_done(requests)


@public
def test_all(requests: Sequence[Request]) -> bool:
    """Make progress once; ``True`` when every request has finished."""
    if all(request.done for request in requests):
        return True
    for engine in _engines(requests):
        engine.progress()
    return all(request.done for request in requests)


@public
def wait_any(requests: Sequence[Request], timeout: float | None = None) -> int:
    """Block until one request finishes; its index (the first finished).

    The request's error is not raised here: ``requests[i].wait()`` returns
    its size or raises it, and ``requests[i].status`` describes it.
    :class:`TimeoutError` after ``timeout`` seconds.
    """
    if not requests:
        raise ValueError("wait_any needs at least one request")
    _wait(
        requests, check_timeout(timeout, "p2p wait_any"), lambda: _first_done(requests) is not None
    )
    index = _first_done(requests)
    assert index is not None
    return index


@public
def wait_all(requests: Sequence[Request], timeout: float | None = None) -> list[int]:
    """Block until every request finishes; their sizes, in order.

    Raises the first failed request's error once all have finished.
    """
    timeout = check_timeout(timeout, "p2p wait_all")
    _wait(requests, timeout, lambda: all(request.done for request in requests))
    for request in requests:
        if request.error is not None:
            raise request.error
    return [request.nbytes for request in requests]


__all__ = ["test_all", "test_any", "wait_all", "wait_any"]
