"""btl/ofi's memory registrations and what a put or get needs of them.

A registration is an ``fi_mr_regattr`` of a page range (the rcache's
backend, :class:`MrBackend`); its libfabric key travels in
:attr:`~pmca.btl.MemoryHandle.packed` together with the registered range
(``pmca.btl.base._remote``), so the side that posts ``fi_write``/``fi_read``
checks the transfer against the range before libfabric sees it. A transfer
larger than :data:`RMA_CHUNK` is posted in chunks and completes once, after
its last (:class:`Transfer`).
"""

from __future__ import annotations

import itertools
from typing import Any

from attrs import define, frozen

from .._interface import Completion
from ..base._remote import pack_remote
from . import _cdef as c
from ._fabric import Fabric

#: The largest single RMA operation posted; larger transfers are split.
RMA_CHUNK = 4 << 20


@frozen
class Mr:
    """One registration: the libfabric memory region and the range it covers."""

    mr: Any
    base: int
    size: int

    def packed(self) -> bytes:
        """The remote key a peer needs to reach this range."""
        return pack_remote(int(self.mr.key), self.base, self.size)


class MrBackend:
    """The rcache backend: ``fi_mr_regattr`` / ``fi_close`` of a page range."""

    ACCESS = c.FI_SEND | c.FI_RECV | c.FI_READ | c.FI_WRITE | c.FI_REMOTE_READ | c.FI_REMOTE_WRITE

    def __init__(self, fabric: Fabric) -> None:
        self._fabric = fabric
        self._keys = itertools.count(1)
        #: Registrations not closed yet.
        self.live = 0

    def register(self, base: int, size: int) -> object:
        mr = self._fabric.register(base, size, self.ACCESS, next(self._keys))
        self.live += 1
        return Mr(mr, base, size)

    def deregister(self, handle: object) -> None:
        assert isinstance(handle, Mr)
        self.live -= 1
        self._fabric.close_fid(self._fabric.fid(handle.mr), "memory region")


@define(eq=False)
class Transfer:
    """A put or get split into operations; ``callback`` runs once, after the last."""

    callback: Completion
    pending: int
    error: BaseException | None = None

    def done(self, error: BaseException | None) -> None:
        self.pending -= 1
        if error is not None and self.error is None:
            self.error = error
        if self.pending == 0:
            self.callback(self.error)


__all__ = ["RMA_CHUNK", "Mr", "MrBackend", "Transfer"]
