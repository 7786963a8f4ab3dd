"""Keyboard interrupts held back while a lifecycle transition runs.

``KeyboardInterrupt`` is raised at whatever bytecode the main thread happens
to run when SIGINT arrives. A transition that pairs a native action with the
record of it (a libc patch and its table entry, a subscription and its
handle, a framework's close and its reference count) would be torn in two,
leaving libc and pmca's state disagreeing. Inside :class:`deferred_interrupts`
the first SIGINT is only noted; it is raised when the transition is over,
after which the caller can see that it came (and, for an init, roll back).

A second SIGINT during the same transition is raised at once: a transition
stuck in a component's hook can still be abandoned, and the rollback paths
then do what they can.

Only the main thread ever receives ``KeyboardInterrupt``, so elsewhere (and
when SIGINT has no Python handler) this does nothing.
"""

from __future__ import annotations

import signal
import threading
from collections.abc import Callable
from types import FrameType, TracebackType
from typing import Any

Handler = Callable[[int, "FrameType | None"], Any]


class Deferral:
    """The SIGINT handler while a transition runs; :attr:`pending` is the noted signal."""

    def __init__(self, previous: Handler | None) -> None:
        self.previous = previous
        self.pending: tuple[int, FrameType | None] | None = None
        self.escalated = False

    @property
    def interrupted(self) -> bool:
        """Whether a SIGINT arrived during the transition (delivered or not)."""
        return self.pending is not None or self.escalated

    def __call__(self, signum: int, frame: FrameType | None) -> None:
        if self.pending is None and not self.escalated:
            self.pending = (signum, frame)
            return
        # Pressed again: the user wants out now, torn transition or not.
        self.pending = None
        self.escalated = True
        if self.previous is not None:
            self.previous(signum, frame)

    def deliver(self) -> None:
        """Run the original handler for the noted signal (raises ``KeyboardInterrupt``)."""
        pending, self.pending = self.pending, None
        if pending is not None and self.previous is not None:
            self.previous(*pending)


class deferred_interrupts:
    """Hold SIGINT back for the ``with`` body; raise it at the end if it came.

    Nested uses hold nothing back themselves: the outermost one delivers.
    A SIGINT arriving after the handler is put back is raised as usual, so
    a transition must still expect ``KeyboardInterrupt`` on its way out.
    """

    def __init__(self) -> None:
        self._previous: Handler | None = None
        self._deferral = Deferral(None)
        self._installed = False

    def __enter__(self) -> Deferral:
        if threading.current_thread() is not threading.main_thread():
            return self._deferral
        current = signal.getsignal(signal.SIGINT)
        if isinstance(current, Deferral):
            return self._deferral  # nested: the outer transition delivers
        if not callable(current):
            return self._deferral  # SIG_DFL, SIG_IGN or a C-level handler: nothing raises
        deferral = Deferral(current)
        try:
            signal.signal(signal.SIGINT, deferral)
        except ValueError:  # not the main interpreter
            return self._deferral
        self._previous, self._deferral, self._installed = current, deferral, True
        return deferral

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        if not self._installed:
            return
        self._installed = False
        signal.signal(signal.SIGINT, self._previous)
        self._deferral.deliver()


__all__ = ["Deferral", "deferred_interrupts"]
