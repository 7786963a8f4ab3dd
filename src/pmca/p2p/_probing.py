"""Probes: ``probe``/``iprobe`` look at the next matching message, ``mprobe``/``improbe`` take it.

A plain probe leaves the message queued, so another thread's receive may
take it between the probe and the receive that follows. A matched probe
(MPI-3's ``MPI_Mprobe``) removes it from matching and returns a
:class:`Message`: only that handle's :meth:`Message.recv` or
:meth:`Message.irecv` receives it, once.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Literal, overload

from .._public import public
from ..btl import PeerFailed
from ._buffers import as_bytes
from ._checks import check_timeout
from ._matching import ANY_SOURCE, Unexpected
from ._requests import Request, Status

if TYPE_CHECKING:
    from ..btl.bml import Bml, BmlPeer


@public
class Message:
    """A message a matched probe took (MPI_Message): receive it with :meth:`recv`/:meth:`irecv`.

    :attr:`status` describes it (its source, tag and size in bytes).
    """

    __slots__ = ("_engine", "_incoming", "_lock", "status")

    def __init__(self, engine: Probing, incoming: Any, status: Status) -> None:
        self._engine = engine
        self._incoming = incoming
        self._lock = threading.Lock()
        self.status = status

    def irecv(self, buf: Any) -> Request:
        """Receive the message into ``buf``; the handle is used up."""
        with self._lock:
            incoming, self._incoming = self._incoming, None
        if incoming is None:
            raise ValueError(f"{self!r} was already received")
        return self._engine.receive_message(incoming, buf)

    @overload
    def recv(
        self, buf: Any, *, timeout: float | None = None, status: Literal[False] = False
    ) -> int: ...
    @overload
    def recv(self, buf: Any, *, timeout: float | None = None, status: Literal[True]) -> Status: ...
    def recv(self, buf: Any, *, timeout: float | None = None, status: bool = False) -> int | Status:
        """Receive the message into ``buf``; its size, or :class:`Status` with ``status=True``."""
        timeout = check_timeout(timeout, "p2p message recv")
        request = self.irecv(buf)
        size = request.wait(timeout)
        if not status:
            return size
        result = request.status
        assert result is not None  # finished
        return result

    def __repr__(self) -> str:
        state = "received" if self._incoming is None else "waiting"
        s = self.status
        return f"<pmca p2p message: {s.count} bytes from rank {s.source} tag {s.tag}, {state}>"


class Probing:
    """``probe``/``iprobe``/``mprobe``/``improbe`` of :class:`pmca.p2p.P2p`."""

    _bml: Bml
    _peers: list[BmlPeer]
    _unexpected: Unexpected[Any]
    #: Peers that finalized, with their error (:mod:`._leaving`).
    gone: dict[int, Any]

    # P2p's, used here:
    _gone_error: Callable[[int], PeerFailed]
    _checked: Callable[..., tuple[int, int]]
    _ensure_open: Callable[[], None]
    _track: Callable[[Request], None]
    _match: Callable[[Request, Any], None]
    _taken: Callable[[int, Any], None]
    _probe_started: Callable[[int], None]
    _probe_ended: Callable[[int], None]
    _probe_missed: Callable[[int], None]
    wait_for: Callable[[Callable[[], bool] | None, float | None], None]

    def iprobe(self, source: int, tag: int) -> Status | None:
        """The :class:`Status` of the message a receive for ``(source, tag)`` would take
        now, or ``None`` (wildcards allowed; the message stays queued)."""
        source, tag = self._checked(source, tag, "p2p probe", wildcard=True)
        with self._bml.lock:
            self._bml.progress()
            incoming = self._look(source, tag, take=False)
            if incoming is None:
                self._probe_missed(source)  # the next progress may read what it looks for
        return None if incoming is None else _status(incoming)

    def probe(self, source: int, tag: int, timeout: float | None = None) -> Status:
        """Wait until a message for ``(source, tag)`` is there; its :class:`Status`.

        :class:`TimeoutError` after ``timeout`` seconds; :class:`PeerFailed`
        when ``source`` failed (:class:`~pmca.btl.PeerFinalized`: finalized)
        with nothing from it left to receive.
        """
        source, tag = self._checked(source, tag, "p2p probe", wildcard=True)
        timeout = check_timeout(timeout, "p2p probe")
        return _status(self._wait_look(source, tag, timeout, take=False))

    def improbe(self, source: int, tag: int) -> Message | None:
        """Take the message a receive for ``(source, tag)`` would take now, as a
        :class:`Message` only its own receive can take; ``None`` when there is none."""
        source, tag = self._checked(source, tag, "p2p mprobe", wildcard=True)
        with self._bml.lock:
            self._bml.progress()
            incoming = self._look(source, tag, take=True)
            if incoming is None:
                self._probe_missed(source)  # the next progress may read what it looks for
        return None if incoming is None else Message(self, incoming, _status(incoming))

    def mprobe(self, source: int, tag: int, timeout: float | None = None) -> Message:
        """Wait for a message for ``(source, tag)`` and take it (see :meth:`improbe`)."""
        source, tag = self._checked(source, tag, "p2p mprobe", wildcard=True)
        timeout = check_timeout(timeout, "p2p mprobe")
        incoming = self._wait_look(source, tag, timeout, take=True)
        return Message(self, incoming, _status(incoming))

    def receive_message(self, incoming: Any, buf: Any) -> Request:
        """The receive of a :class:`Message` (its ``irecv``)."""
        view = as_bytes(buf, writable=True, rank=incoming.source, tag=incoming.tag)
        request = Request(self, "recv", incoming.source, incoming.tag, view)  # type: ignore[arg-type]
        with self._bml.lock:
            self._ensure_open()  # under the lock finalize says its LEAVEs under
            self._track(request)
            self._match(request, incoming)
        return request

    def _look(self, source: int, tag: int, *, take: bool) -> Any:
        """With the lock held: the first matching unexpected message (removed if ``take``)."""
        self._ensure_open()
        unexpected = self._unexpected
        incoming = unexpected.take(source, tag) if take else unexpected.first(source, tag)
        if incoming is not None and take:
            self._taken(incoming.source, incoming.payload)
        if incoming is None and source != ANY_SOURCE:
            peer = self._peers[source]
            if source in self.gone:
                raise self._gone_error(source)
            if peer.failed is not None:
                raise PeerFailed(f"rank {source} failed: {peer.failed}", rank=source)
        return incoming

    def _wait_look(self, source: int, tag: int, timeout: float | None, *, take: bool) -> Any:
        found: list[Any] = []
        lock = self._bml.lock

        def there() -> bool:
            with lock:
                incoming = self._look(source, tag, take=take)
            if incoming is not None:
                found.append(incoming)
            return bool(found)

        with lock:
            self._probe_started(source)
        try:
            self.wait_for(there, timeout)
        except TimeoutError:
            what = "mprobe" if take else "probe"
            raise TimeoutError(
                f"p2p {what} for rank {source} tag {tag} found no message within {timeout:g} s"
            ) from None
        finally:
            with lock:
                self._probe_ended(source)
        return found[0]


def _status(incoming: Any) -> Status:
    return Status(incoming.source, incoming.tag, incoming.size)


__all__ = ["Message", "Probing"]
