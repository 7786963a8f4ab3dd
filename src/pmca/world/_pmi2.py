"""A world from PMI-2, spoken over the launcher's file descriptor (``PMI_FD``).

PMI-2 messages are ``cmd=NAME;key=value;...;`` preceded by their length as
6 decimal characters, padded with spaces: MPICH aligns them right, Slurm
left (``b'114   cmd=fullinit-response;...'``), so both are read and the
right-aligned form is written; a ``;`` inside a key or value is
written ``;;``. The conversation opens with PMI-1's ``init`` line asking for
version 2 (:func:`._pmi.from_pmi`), then ``fullinit`` tells the server who
this process is. MPICH's Hydra serves PMI-2 on the same descriptor as
PMI-1; Slurm's ``--mpi=pmi2`` plugin serves it on ``PMI_FD`` and names the
job in ``PMI_JOBID``.

The modex: ``kvs-put`` each part, one ``kvs-fence`` (which publishes the
puts), ``kvs-get`` with the job id and the source rank as hints. Where the
server answers the fence at once (Hydra), the gets are what wait for the
other ranks: a rank that never enters the modex shows as a ``kvs-get``
without answer. PMI-2 has no ``get_maxes``: keys and values have the
protocol's fixed bounds (:data:`KEY_MAX`, :data:`VALUE_MAX`), and entries
longer than a value are split as with PMI-1.
"""

from __future__ import annotations

import os
import re

from .._public import public
from ._interface import LauncherError
from ._job import job_words
from ._pmi_base import PmiConnection, PmiWorld

#: PMI-2's bounds on a key and on a value (``PMI2_MAX_KEYLEN``/``PMI2_MAX_VALLEN``).
KEY_MAX = 64
VALUE_MAX = 1024
#: Characters of the length that leads every message.
HEADER = 6
_FIELD = re.compile(r"((?:[^;]|;;)*);")


def _escape(text: str) -> str:
    return text.replace(";", ";;")


def frame(command: str, fields: dict[str, str]) -> bytes:
    """``command`` and ``fields`` as one PMI-2 message."""
    body = f"cmd={command};" + "".join(
        f"{_escape(key)}={_escape(value)};" for key, value in fields.items()
    )
    data = body.encode("ascii")
    if len(data) >= 10**HEADER:
        raise LauncherError(f"PMI-2: {command!r} of {len(data)} characters is too long to send")
    return f"{len(data):{HEADER}d}".encode("ascii") + data


def message_end(pending: bytes) -> int | None:
    """The length of the first whole message in ``pending``, or ``None`` if incomplete."""
    if len(pending) < HEADER:
        return None
    digits = pending[:HEADER].strip(b" ")
    if not digits.isdigit():
        raise ValueError(f"no length header: {pending[:40]!r}")
    end = HEADER + int(digits)
    return end if len(pending) >= end else None


def parse(message: str) -> dict[str, str]:
    """The fields of a message read whole (header included)."""
    body = message[HEADER:]
    if not body.endswith(";"):
        body += ";"  # the final separator is optional in some servers' answers
    fields: dict[str, str] = {}
    position = 0
    for match in _FIELD.finditer(body):
        if match.start() != position:
            break
        position = match.end()
        token = match[1].replace(";;", ";")
        key, sep, value = token.partition("=")
        if not sep or not key:
            raise ValueError(f"{token!r} is not key=value")
        fields[key] = value
    if position != len(body):
        raise ValueError(f"unterminated field in {body[position : position + 40]!r}")
    return fields


@public
class Pmi2World(PmiWorld):
    """A world over PMI-2, once ``init`` agreed on version 2."""

    protocol = "PMI-2"
    finalize_message = frame("finalize", {})

    def __init__(self, connection: PmiConnection, rank: int, size: int, timeout: float) -> None:
        connection.protocol = self.protocol
        self._conn = connection
        fields = {"pmirank": str(rank), "threaded": "FALSE"}
        if "PMI_JOBID" in os.environ:  # Slurm's job id: its server wants it back
            fields = {"pmijobid": os.environ["PMI_JOBID"], **fields}
        reply = self._command("fullinit", fields, timeout)
        try:
            rank, size = int(reply["rank"]), int(reply["size"])
            self.appnum = int(reply.get("appnum", "0"))
        except (KeyError, ValueError):
            connection.fail(f"fullinit answered {reply!r}")
        if not 0 <= rank < size:
            connection.fail(f"fullinit gave rank {rank} outside a job of size {size}")
        super().__init__(connection, rank, size, KEY_MAX, VALUE_MAX)
        self.jobid = self._command("job-getid", {}, timeout).get("jobid", "")
        if not self.jobid:
            connection.fail("job-getid named no job")
        #: The job's name as the live view and ``pmca stats --job`` know it.
        self.job, words = job_words(self.jobid, "PMI-2 job id")
        self.description = f"PMI-2 ({words}, rank {rank} of {size})"
        universe = self._job_attribute("universeSize", timeout)
        self.universe_size = int(universe) if universe and universe.isdigit() else None
        self._ready(timeout)

    def _command(self, command: str, fields: dict[str, str], timeout: float) -> dict[str, str]:
        """Send ``command``; the fields of its ``command-response``."""
        return self._conn.exchange(
            command, frame(command, fields), message_end, parse, f"{command}-response", timeout
        )

    def _put(self, key: str, value: str, timeout: float) -> None:
        self._command("kvs-put", {"key": key, "value": value}, timeout)

    def _fence(self, timeout: float) -> None:
        self._command("kvs-fence", {}, timeout)

    def barrier(self, *, timeout: float | None = None) -> None:
        """An exchange of empty entries: ``kvs-fence`` alone is no barrier.

        A server may answer the fence at once and make ``kvs-get`` wait
        instead (Hydra does: the fence only marks an epoch). Every rank's
        get waits for every other rank's put, so nobody leaves before all
        entered.
        """
        self.allgather(b"", timeout=timeout)

    def _get_value(self, rank: int, key: str, timeout: float) -> str:
        fields = {"jobid": self.jobid, "srcid": str(rank), "key": key}
        reply = self._command("kvs-get", fields, timeout)
        if reply.get("found", "TRUE").upper() != "TRUE" or "value" not in reply:
            raise LauncherError(f"PMI-2: 'kvs-get' found no {key!r} (rank {rank}) after the fence")
        return reply["value"]

    def _job_attribute(self, key: str, timeout: float) -> str | None:
        try:
            reply = self._command("info-getjobattr", {"key": key}, timeout)
        except LauncherError:
            if self._conn.broken is not None:
                raise
            return None  # refused (rc != 0): the server has no such attribute
        if reply.get("found", "FALSE").upper() != "TRUE":
            return None
        return reply.get("value")
