"""A world from PMI-1, spoken over the launcher's file descriptor (``PMI_FD``).

MPICH's Hydra (``mpiexec``) and Slurm serve the PMI-1 wire protocol: lines of
``cmd=NAME key=value ...`` on a socket the launcher passes in ``PMI_FD``,
with ``PMI_RANK`` and ``PMI_SIZE`` in the environment. pmca speaks it in pure
Python, so a tool needs no MPI library to join its job.

The modex goes through the key-value space: each rank ``put``s its data,
everybody meets in ``barrier_in``/``barrier_out`` (which also publishes the
puts), then ``get``s every other rank's. Values are text without spaces,
``=`` or newlines and at most ``vallen_max`` characters (the server says how
many in ``get_maxes``). What PMI-1 shares with PMI-2 (deadlines, errors,
splitting entries) is in :mod:`._pmi_base`.

Both versions open with a PMI-1 ``init`` line naming the version the client
wants: :func:`from_pmi` asks for PMI-2 first (``pmca_base_pmi_version=auto``)
and takes PMI-1 when the server answers with version 1 or refuses.
"""

from __future__ import annotations

import os

from .._public import public
from ._interface import DEFAULT_TIMEOUT, LauncherError
from ._job import job_words
from ._pmi_base import PmiConnection, PmiWorld, env_int

#: ``pmca_base_pmi_version`` values.
PMI_VERSIONS = ("auto", "1", "2")


def _parse(line: str) -> dict[str, str]:
    fields: dict[str, str] = {}
    for token in line.strip().split(" "):
        if not token:
            continue
        key, sep, value = token.partition("=")
        if not sep:
            raise ValueError(f"{token!r} is not key=value")
        fields[key] = value
    return fields


def _line_end(pending: bytes) -> int | None:
    end = pending.find(b"\n")
    return None if end < 0 else end + 1


def _line(command: str, fields: dict[str, str]) -> bytes:
    text = " ".join(f"{key}={value}" for key, value in fields.items())
    return f"cmd={command} {text}".rstrip().encode("ascii") + b"\n"


def line_command(
    connection: PmiConnection, command: str, fields: dict[str, str], answer: str, timeout: float
) -> dict[str, str]:
    """Send the PMI-1 line ``cmd=command fields...``; the fields of the ``cmd=answer`` line."""
    message = _line(command, fields)
    return connection.exchange(command, message, _line_end, _parse, answer, timeout)


@public
class Pmi1World(PmiWorld):
    """A world over PMI-1, once ``init`` agreed on version 1."""

    protocol = "PMI-1"
    finalize_message = b"cmd=finalize\n"

    def __init__(self, connection: PmiConnection, rank: int, size: int, timeout: float) -> None:
        connection.protocol = self.protocol
        self._conn = connection
        maxes = self._command("get_maxes", {}, "maxes", timeout)
        try:
            key_max, value_max = int(maxes["keylen_max"]), int(maxes["vallen_max"])
        except (KeyError, ValueError):
            connection.fail(f"get_maxes answered {maxes!r}")
        super().__init__(connection, rank, size, key_max, value_max)
        self.appnum = int(self._command("get_appnum", {}, "appnum", timeout).get("appnum", "0"))
        self.kvsname = self._command("get_my_kvsname", {}, "my_kvsname", timeout).get("kvsname", "")
        if not self.kvsname:
            connection.fail("get_my_kvsname named no key-value space")
        #: The job's name as the live view and ``pmca stats --job`` know it.
        self.job, words = job_words(self.kvsname, "kvs")
        self.description = f"PMI-1 ({words}, rank {rank} of {size})"
        self._ready(timeout)

    def _command(
        self, command: str, fields: dict[str, str], answer: str, timeout: float
    ) -> dict[str, str]:
        return line_command(self._conn, command, fields, answer, timeout)

    def _put(self, key: str, value: str, timeout: float) -> None:
        fields = {"kvsname": self.kvsname, "key": key, "value": value}
        self._command("put", fields, "put_result", timeout)

    def _fence(self, timeout: float) -> None:
        self._command("barrier_in", {}, "barrier_out", timeout)

    def _get_value(self, rank: int, key: str, timeout: float) -> str:
        reply = self._command("get", {"kvsname": self.kvsname, "key": key}, "get_result", timeout)
        if "value" not in reply:
            self._conn.fail(f"get {key!r} answered no value")
        return reply["value"]

    def _job_attribute(self, key: str, timeout: float) -> str | None:
        try:
            fields = {"kvsname": self.kvsname, "key": key}
            return self._command("get", fields, "get_result", timeout).get("value")
        except LauncherError:
            if self._conn.broken is not None:
                raise
            return None  # the server has no such key (rc != 0)


def _init(connection: PmiConnection, version: int, timeout: float) -> dict[str, str]:
    subversion = "1" if version == 1 else "0"
    fields = {"pmi_version": str(version), "pmi_subversion": subversion}
    return line_command(connection, "init", fields, "response_to_init", timeout)


@public
def from_pmi(*, timeout: float | None = None, version: str = "auto") -> PmiWorld:
    """A world from the PMI server of the launcher (``PMI_FD``, ``PMI_RANK``, ``PMI_SIZE``).

    ``version`` (``pmca_base_pmi_version``): ``"auto"`` speaks PMI-2 where
    the server offers it, else PMI-1; ``"1"`` or ``"2"`` insist on one
    (a server without it is an error). The world's ``why`` says which was
    chosen and why. Every rank of the job must call it. ``timeout`` bounds
    each answer of the launcher (default 60 s). Call :meth:`PmiWorld.close`
    (a session that built the world itself does) before the process exits.
    """
    if version not in PMI_VERSIONS:
        raise LauncherError(
            f"pmca_base_pmi_version={version!r}: expected one of {', '.join(PMI_VERSIONS)}"
        )
    limit = DEFAULT_TIMEOUT if timeout is None else timeout
    fd = env_int("PMI_FD")
    rank, size = env_int("PMI_RANK"), env_int("PMI_SIZE")
    if not 0 <= rank < size:
        raise LauncherError(f"PMI: rank {rank} is outside a job of size {size}")
    connection = PmiConnection(fd, "PMI" if version == "auto" else f"PMI-{version}")
    try:
        os.fstat(fd)
    except OSError as exc:
        raise LauncherError(
            f"{connection.protocol}: PMI_FD={fd} is not an open file descriptor ({exc})"
        ) from None
    if version != "1":
        try:
            offered = _init(connection, 2, limit).get("pmi_version")
        except LauncherError as exc:
            if version == "2" or connection.broken is not None:
                raise
            offered, refusal = None, str(exc)
        else:
            refusal = f"it answered pmi_version={offered}"
        if offered == "2":
            from ._pmi2 import Pmi2World

            why = "pmca_base_pmi_version=2" if version == "2" else "the launcher offers PMI-2"
            world: PmiWorld = Pmi2World(connection, rank, size, limit)
            world.why = f"{why} (init pmi_version=2 accepted)"
            return world
        if version == "2":
            connection.fail(f"the launcher does not offer PMI-2: {refusal} to init")
        why = f"the launcher does not offer PMI-2 ({refusal} to init pmi_version=2)"
    else:
        why = "pmca_base_pmi_version=1"
    reply = _init(connection, 1, limit)
    if reply.get("pmi_version") != "1":
        connection.fail(f"the launcher speaks PMI version {reply.get('pmi_version')!r}, not 1")
    world = Pmi1World(connection, rank, size, limit)
    world.why = why
    return world
