"""A world over an mpi4py communicator.

The exchange uses point-to-point messages on a private duplicate of the
communicator rather than ``MPI_Allgather``: a collective cannot time out,
and a modex that hangs on a dead rank is exactly what must not happen. Each
rank posts its data to every other rank and polls for theirs; at the
timeout the ranks still missing are named.
"""

from __future__ import annotations

import time
from typing import Any

from .._public import public
from ._interface import DEFAULT_TIMEOUT, Closing, WorldError, WorldTimeout, checked_timeout

_TAG = 0x504D  # "PM": private to the duplicated communicator anyway


def _library_name(mpi: Any) -> str:
    try:
        text = str(mpi.Get_library_version()).strip().splitlines()[0]
    except Exception:
        return "MPI"
    return text.split(",")[0]


@public
class MpiWorld(Closing):
    """``rank``/``size``/``allgather``/``barrier`` over an mpi4py communicator.

    Collectives wait at most ``timeout`` seconds unless given their own
    bound. :meth:`close` frees the duplicated communicator; a world never
    closed leaves it to ``MPI_Finalize``, which mpi4py calls after every
    ``atexit`` function of the interpreter.
    """

    def __init__(self, comm: Any, *, timeout: float = DEFAULT_TIMEOUT) -> None:
        self.timeout = checked_timeout(timeout, "pmca.world.from_mpi")
        try:
            from mpi4py import MPI
        except ImportError as exc:  # pragma: no cover - depends on the extra
            raise WorldError(
                "pmca.world.from_mpi needs mpi4py (install the extra: pip install 'pmca[mpi]')"
            ) from exc
        if not isinstance(comm, MPI.Comm):
            raise WorldError(f"pmca.world.from_mpi expects an mpi4py communicator, got {comm!r}")
        if comm == MPI.COMM_NULL:
            raise WorldError("pmca.world.from_mpi was given MPI.COMM_NULL")
        self._mpi = MPI
        self._comm = comm.Dup()
        self.rank: int = self._comm.Get_rank()
        self.size: int = self._comm.Get_size()
        name = comm.Get_name() or "communicator"
        self.description = f"mpi4py {name} ({_library_name(MPI)})"

    def allgather(self, data: bytes, *, timeout: float | None = None) -> list[bytes]:
        timeout = self._bound(timeout, "MpiWorld allgather")
        mpi = self._mpi
        comm = self._comm
        payload = bytes(data)
        sends = [
            comm.Isend([payload, mpi.BYTE], dest=peer, tag=_TAG)
            for peer in range(self.size)
            if peer != self.rank
        ]
        gathered: list[bytes | None] = [None] * self.size
        gathered[self.rank] = payload
        missing = [peer for peer in range(self.size) if peer != self.rank]
        deadline = time.monotonic() + timeout
        status = mpi.Status()
        pause = 0.0
        while missing:
            progressed = False
            for peer in list(missing):
                if comm.Iprobe(source=peer, tag=_TAG, status=status):
                    buffer = bytearray(status.Get_count(mpi.BYTE))
                    comm.Recv([buffer, mpi.BYTE], source=peer, tag=_TAG)
                    gathered[peer] = bytes(buffer)
                    missing.remove(peer)
                    progressed = True
            if not missing:
                break
            if time.monotonic() > deadline:
                for request in sends:
                    request.Cancel()
                raise WorldTimeout(
                    f"{self.description}: rank {self.rank} got nothing from "
                    f"rank{'s' if len(missing) > 1 else ''} {', '.join(map(str, missing))} "
                    f"within {timeout:g} s",
                    missing=missing,
                )
            pause = 0.0 if progressed else min(0.001, pause + 0.00005)
            if pause:
                time.sleep(pause)
        self._finish_sends(sends, deadline)
        return [item if item is not None else b"" for item in gathered]

    def _finish_sends(self, sends: list[Any], deadline: float) -> None:
        while not self._mpi.Request.Testall(sends):
            if time.monotonic() > deadline:
                raise WorldTimeout(
                    f"{self.description}: rank {self.rank}'s modex data was not delivered "
                    "before the timeout",
                    missing=[],
                )
            time.sleep(0.0001)

    def barrier(self, *, timeout: float | None = None) -> None:
        self.allgather(b"", timeout=self._bound(timeout, "MpiWorld barrier"))

    def close(self) -> None:
        """Free the duplicated communicator (optional; MPI_Finalize frees it too)."""
        comm, self._comm = self._comm, self._mpi.COMM_NULL
        if comm != self._mpi.COMM_NULL and not self._mpi.Is_finalized():
            comm.Free()

    #: The name this world's close had first.
    free = close

    def __repr__(self) -> str:
        return f"<MpiWorld {self.description} rank {self.rank} of {self.size}>"


@public
def from_mpi(comm: Any, *, timeout: float = DEFAULT_TIMEOUT) -> MpiWorld:
    """A world over ``comm`` (an mpi4py communicator, usually ``MPI.COMM_WORLD``).

    Collective: every rank of ``comm`` must call it (it duplicates ``comm``
    so that pmca's messages never match the application's). ``timeout``:
    the seconds a collective waits when called without a bound of its own.
    """
    return MpiWorld(comm, timeout=timeout)
