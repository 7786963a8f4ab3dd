"""put/get without CMA: the owner of the memory copies it through the FIFOs.

Open MPI's sm calls this single-copy mechanism ``emulated``.  A get is a
request the owner answers, in its progress, with ``max_send_size``
fragments of the registered range (copy-in), which the requester copies
into its buffer (copy-out); a put streams fragments the owner copies into
its registered memory and acknowledges.  The owner checks every range
against its own live registrations, so a peer can only ever touch memory
that was offered to it.  These messages use native tags above the btl's
active-message range (``0..TAG_MAX``), so they never reach a user callback.
"""

from __future__ import annotations

import itertools
import struct
from collections.abc import Callable
from typing import Any

from attrs import define

from ..._records import Record
from .._interface import BtlError, Completion
from .._limits import TAG_MAX
from ..base._remote import memory_at

GET_REQUEST = TAG_MAX + 1
GET_DATA = TAG_MAX + 2
PUT_DATA = TAG_MAX + 3
DONE = TAG_MAX + 4
INTERNAL_TAGS = frozenset((GET_REQUEST, GET_DATA, PUT_DATA, DONE))

_GET = struct.Struct("<QQQQ")  # request id, registration key, address, length
_DATA = struct.Struct("<QQ")  # request id, offset
_PUT = struct.Struct("<QQQQQ")  # request id, registration key, address, total, offset
_DONE = struct.Struct("<QI")  # request id, status (0 ok, 1 refused)

#: ``send(rank, tag, head, body)``: queue one message to ``rank`` in order.
Send = Callable[[int, int, bytes, Any], None]
#: ``check(key, address, size)``: raise unless the range is registered here.
Check = Callable[[int, int, int], None]


@define(eq=False, repr=False)
class _Pending(Record):
    rank: int
    target: memoryview | None  # where a get lands; None for a put
    size: int
    callback: Completion
    received: int = 0


@define(eq=False, repr=False)
class _Incoming(Record):
    """A put being written into this process's memory."""

    total: int
    received: int = 0
    failed: bool = False


class Emulation:
    """Emulated put/get of one sm module."""

    def __init__(self, send: Send, check: Check, chunk: int) -> None:
        self._send = send
        self._check = check
        self._chunk = chunk
        self._ids = itertools.count(1)
        self._pending: dict[int, _Pending] = {}
        self._puts: dict[tuple[int, int], _Incoming] = {}

    # -- the requester ----------------------------------------------------------

    def get(self, rank: int, local: memoryview, key: int, address: int, done: Completion) -> None:
        request = next(self._ids)
        target = local.cast("B") if local.nbytes else local
        self._pending[request] = _Pending(rank, target, local.nbytes, done)
        self._send(rank, GET_REQUEST, _GET.pack(request, key, address, local.nbytes), b"")

    def put(self, rank: int, local: memoryview, key: int, address: int, done: Completion) -> None:
        request = next(self._ids)
        self._pending[request] = _Pending(rank, None, local.nbytes, done)
        source = local.cast("B") if local.nbytes else local
        step = self._chunk - _PUT.size
        for offset in range(0, max(local.nbytes, 1), step):
            head = _PUT.pack(request, key, address, local.nbytes, offset)
            self._send(rank, PUT_DATA, head, source[offset : offset + step])

    # -- both sides ---------------------------------------------------------------

    def handle(self, rank: int, tag: int, data: memoryview) -> int:
        """One internal message from ``rank``; returns the operations it completed."""
        if tag == GET_REQUEST:
            self._serve_get(rank, *_GET.unpack_from(data))
        elif tag == PUT_DATA:
            self._take_put(rank, data)
        elif tag == GET_DATA:
            request, offset = _DATA.unpack_from(data)
            pending = self._pending.get(request)
            if pending is not None and pending.target is not None:
                body = data[_DATA.size :]
                pending.target[offset : offset + body.nbytes] = body
                pending.received += body.nbytes
                if pending.received >= pending.size:
                    return self._complete(request, None)
        elif tag == DONE:
            request, status = _DONE.unpack_from(data)
            refused = BtlError(
                f"btl sm: rank {rank} refused an emulated put/get outside its registrations"
            )
            return self._complete(request, refused if status else None)
        return 0

    def _complete(self, request: int, error: BaseException | None) -> int:
        pending = self._pending.pop(request, None)
        if pending is None:
            return 0
        pending.callback(error)
        return 1

    # -- the owner ------------------------------------------------------------------

    def _allowed(self, key: int, address: int, size: int) -> bool:
        try:
            self._check(key, address, size)
        except BtlError:
            return False
        return True

    def _serve_get(self, rank: int, request: int, key: int, address: int, size: int) -> None:
        if not self._allowed(key, address, size):
            self._send(rank, DONE, _DONE.pack(request, 1), b"")
            return
        if size == 0:
            self._send(rank, DONE, _DONE.pack(request, 0), b"")
            return
        memory = memory_at(address, size)
        step = self._chunk - _DATA.size
        for offset in range(0, size, step):
            self._send(rank, GET_DATA, _DATA.pack(request, offset), memory[offset : offset + step])

    def _take_put(self, rank: int, data: memoryview) -> None:
        request, key, address, total, offset = _PUT.unpack_from(data)
        body = data[_PUT.size :]
        incoming = self._puts.setdefault((rank, request), _Incoming(total))
        if not incoming.failed and body.nbytes:
            if self._allowed(key, address + offset, body.nbytes):
                memory_at(address + offset, body.nbytes)[:] = body
            else:
                incoming.failed = True
        incoming.received += body.nbytes
        if incoming.received >= total:
            del self._puts[(rank, request)]
            self._send(rank, DONE, _DONE.pack(request, int(incoming.failed)), b"")

    # -- failures -------------------------------------------------------------------

    def fail(self, rank: int | None, error: BaseException) -> None:
        """Fail what waits on ``rank`` (every peer with ``None``)."""
        for request, pending in list(self._pending.items()):
            if rank is None or pending.rank == rank:
                del self._pending[request]
                pending.callback(error)
        for key in [key for key in self._puts if rank is None or key[0] == rank]:
            del self._puts[key]


__all__ = ["INTERNAL_TAGS", "Emulation"]
