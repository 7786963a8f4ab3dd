"""Rendezvous: large messages read with btl ``get`` or pushed in fragments.

With RDMA-capable routes the receiver, once matched, reads the sender's
registered buffer with ``get`` (striped across the routes by bandwidth) and
answers FIN with the outcome; without RDMA it answers a clear-to-send, and
the sender pushes fragments the receiver copies into place.
"""

from __future__ import annotations

import functools
import itertools
from collections.abc import Callable
from typing import TYPE_CHECKING

from attrs import define

from ..btl import BtlError, Flags, PeerFinalized
from . import _protocol as proto
from ._buffers import address_of
from ._requests import Request, fin_error
from ._routes import stripes

if TYPE_CHECKING:
    from structlog.typing import FilteringBoundLogger

    from ..btl.bml import Bml, BmlPeer, Route


@define(eq=False)
class Incoming:
    """A matching message that arrived before its receive was posted."""

    kind: int
    source: int
    tag: int
    size: int
    payload: bytes | bytearray = b""
    send_id: int = 0
    address: int = 0
    handles: dict[str, bytes] | None = None
    order: int = 0  # the arrival number (matching)


@define(eq=False)
class _Countdown:
    """Pieces of one transfer still to finish, and the first error among them."""

    left: int
    error: BaseException | None = None

    def count(self, error: BaseException | None) -> bool:
        """Count one piece done; ``True`` when it was the last."""
        if error is not None and self.error is None:
            self.error = error
        self.left -= 1
        return self.left == 0


@define(eq=False)
class Fragments:
    request: Request
    size: int
    received: int = 0


class Rendezvous:
    """The rendezvous half of :class:`pmca.p2p.P2p`: get, FIN, clear-to-send, fragments."""

    _bml: Bml
    _tag: int
    _log: FilteringBoundLogger
    _ids: itertools.count[int]
    _sends: dict[int, Request]
    _fragments: dict[int, Fragments]

    # P2p's and Leaving's, used here:
    _peers: list[BmlPeer]
    gone: dict[int, PeerFinalized]
    _finish: Callable[..., None]
    _control_to: Callable[[int, bytes], None]
    _route: Callable[[BmlPeer], Route]
    _failure: Callable[[BmlPeer], BaseException]
    _unanswered: Callable[[Request], PeerFinalized]
    _read_started: Callable[[int], None]
    _read_finished: Callable[[int, bytes], bool]
    eased: Callable[[int], None]

    def _awaiting_answer(self, request: Request, send_id: int | None = None) -> int:
        """Register the rendezvous send ``request`` until its receiver answers (FIN, or
        clear-to-send): its id (``send_id``, or a new one) for that answer to name.

        A send whose peer failed or finalized meanwhile (a lane's send that met
        it while polling for its FIN) fails at once: no answer will come.
        """
        if send_id is None:
            send_id = next(self._ids)
        self._sends[send_id] = request
        request.cleanup.append(functools.partial(self._sends.pop, send_id, None))
        rank = request.peer
        self.eased(rank)  # its answer may be behind input a btl stopped
        if rank in self.gone:
            self._finish(request, 0, self._unanswered(request))
        elif self._peers[rank].failed is not None:
            self._finish(request, 0, self._failure(self._peers[rank]))
        return send_id

    def _clear_to_send(self, request: Request, incoming: Incoming) -> None:
        """Answer a matched RNDV: the sender may push its fragments."""
        recv_id = next(self._ids)
        self._fragments[recv_id] = Fragments(request, incoming.size)
        request.cleanup.append(lambda: self._fragments.pop(recv_id, None))
        self._control_to(incoming.source, proto.CTS_MSG.pack(proto.CTS, incoming.send_id, recv_id))
        if incoming.size == 0:
            self._finish(request, 0)

    def _get(self, request: Request, incoming: Incoming) -> None:
        peer = self._bml.peer(incoming.source)
        handles = incoming.handles or {}
        routes = [(route, weight) for route, weight in peer.rdma if route.name in handles]
        size = incoming.size
        if not routes:
            error = BtlError(
                f"rank {incoming.source} offered its buffer through "
                f"{', '.join(handles) or 'no btl'}, which this process cannot read"
            )
            self._finish(request, 0, error)
            self._control_to(
                incoming.source,
                proto.FIN_MSG.pack(proto.FIN, proto.STATUS_FAILED, incoming.send_id),
            )
            return
        total = sum(weight for _, weight in routes)
        pieces = stripes([(r, w / total) for r, w in routes], size)
        state = _Countdown(len(pieces))
        source = incoming.source
        self._read_started(source)  # this rank's LEAVE to it waits for the FIN

        def piece_done(error: BaseException | None) -> None:
            if state.count(error):
                failed = state.error
                status = proto.STATUS_OK if failed is None else proto.STATUS_FAILED
                fin = proto.FIN_MSG.pack(proto.FIN, status, incoming.send_id)
                if not self._read_finished(source, fin) and failed is None:
                    failed = BtlError(
                        f"p2p finalize: the read of rank {source}'s {size}-byte message "
                        f"(tag {request.tag}) ended after this rank told it that it left"
                    )
                self._finish(request, size if failed is None else 0, failed)

        if not pieces:
            state.left = 1
            piece_done(None)
            return
        failure: BaseException | None = None
        for route, offset, length in pieces:
            if failure is not None:  # the transfer failed: the pieces left are done too
                piece_done(failure)
                continue
            local = request.view[offset : offset + length]
            module = route.module
            try:
                local_handle = None
                if module.limits.flags & Flags.REGISTRATION_REQUIRED:
                    local_handle = module.register_mem(route.endpoint, address_of(local), length)
                    request.cleanup.append(functools.partial(module.deregister_mem, local_handle))
                module.get(
                    route.endpoint,
                    local,
                    local_handle,
                    incoming.address + offset,
                    handles[route.name],
                    piece_done,
                )
            except BaseException as exc:  # counted, or the read holds this rank's LEAVE
                failure = exc
                piece_done(exc)
        if failure is not None and not isinstance(failure, Exception):
            raise failure  # an interrupt: the request failed with it too

    def _fin(self, source: int, status: int, send_id: int) -> None:
        request = self._sends.pop(send_id, None)
        if request is None:
            self._log.warning("FIN for an unknown send; ignored", source=source, send=send_id)
            return
        nbytes = request.view.nbytes
        error = fin_error(source, status, request.tag, nbytes)
        self._finish(request, 0 if error else nbytes, error)

    def _push_fragments(self, source: int, send_id: int, recv_id: int) -> None:
        request = self._sends.pop(send_id, None)
        if request is None:
            return
        peer = self._bml.peer(source)
        route = self._route(peer)
        chunk = route.module.limits.max_send_size - proto.FRAG_HEAD.size
        view = request.view
        offsets = list(range(0, view.nbytes, chunk))
        state = _Countdown(len(offsets))
        if not offsets:
            self._finish(request, 0)
            return

        def sent(error: BaseException | None) -> None:
            if state.count(error) or error is not None:
                self._finish(request, view.nbytes if state.error is None else 0, state.error)

        for offset in offsets:
            head = proto.FRAG_HEAD.pack(proto.FRAG, recv_id, offset)
            route.module.send(
                route.endpoint, self._tag, [head, view[offset : offset + chunk]], sent
            )

    def _fragment(self, data: memoryview) -> None:
        _, recv_id, offset = proto.FRAG_HEAD.unpack_from(data)
        state = self._fragments.get(recv_id)
        if state is None:
            return
        body = data[proto.FRAG_HEAD.size :]
        state.request.view[offset : offset + body.nbytes] = body
        state.received += body.nbytes
        if state.received >= state.size:
            self._finish(state.request, state.size)


__all__ = ["Fragments", "Incoming", "Rendezvous"]
