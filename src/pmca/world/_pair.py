"""A world of two local processes joined by a connected socket (no MPI needed).

``pmca doctor`` and tests use it to check every btl between a process and a
child it starts; real jobs use :func:`pmca.world.from_mpi`.
"""

from __future__ import annotations

import socket
import struct

from .._public import public
from .._sockets import recv_exactly
from ._interface import DEFAULT_TIMEOUT, Closing, WorldError, WorldTimeout, checked_timeout

_LENGTH = struct.Struct("<Q")


@public
class PairWorld(Closing):
    """Rank ``rank`` of 2; the other process holds the other end of ``sock``.

    Collectives wait at most ``timeout`` seconds unless given their own
    bound; :meth:`close` closes ``sock``.
    """

    size = 2

    def __init__(self, sock: socket.socket, rank: int, *, timeout: float = DEFAULT_TIMEOUT) -> None:
        if rank not in (0, 1):
            raise WorldError(f"a pair world has ranks 0 and 1, not {rank}")
        self._sock = sock
        self.rank = rank
        self.timeout = checked_timeout(timeout, "pmca.world.PairWorld")
        self.description = f"socket pair (rank {rank} of 2)"

    def _receive(self, size: int, timeout: float) -> bytes:
        self._sock.settimeout(timeout)
        try:
            return recv_exactly(self._sock, size, "an allgather")
        except ConnectionResetError as exc:
            raise WorldError(
                f"{self.description}: rank {1 - self.rank} went away ({exc})"
            ) from None
        except TimeoutError:
            raise WorldTimeout(
                f"{self.description}: nothing from rank {1 - self.rank} within {timeout:g} s",
                missing=[1 - self.rank],
            ) from None

    def allgather(self, data: bytes, *, timeout: float | None = None) -> list[bytes]:
        timeout = self._bound(timeout, "PairWorld allgather")
        self._sock.settimeout(timeout)
        try:
            self._sock.sendall(_LENGTH.pack(len(data)) + bytes(data))
        except TimeoutError:
            raise WorldTimeout(
                f"{self.description}: rank {1 - self.rank} took not all of this rank's data "
                f"within {timeout:g} s",
                missing=[1 - self.rank],
            ) from None
        (length,) = _LENGTH.unpack(self._receive(_LENGTH.size, timeout))
        other = self._receive(length, timeout)
        return [bytes(data), other] if self.rank == 0 else [other, bytes(data)]

    def barrier(self, *, timeout: float | None = None) -> None:
        self.allgather(b"", timeout=self._bound(timeout, "PairWorld barrier"))

    def close(self) -> None:
        self._sock.close()
