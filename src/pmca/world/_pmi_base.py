"""What PMI-1 and PMI-2 share: the launcher's descriptor, deadlines, errors, the modex.

MPICH's Hydra (``mpiexec``) and Slurm serve PMI on a socket the launcher
passes in ``PMI_FD``. The two protocol versions frame their messages
differently (:mod:`._pmi`, :mod:`._pmi2`), but a world needs the same things
from both: send a command and read its answer within a deadline, put a
modex entry too large for one value as several, meet in a fence, get every
other rank's entry, read ``PMI_process_mapping``, send ``finalize`` at exit.

Values are base64 without padding, split over as many keys as they need
(at most :data:`MAX_PARTS`); the number of parts leads the first value.
Every write and read waits at most ``timeout`` seconds
(``pmca_base_modex_timeout``): a launcher that never answers, stops reading,
closes the descriptor, or answers something that is not PMI gives a
:class:`LauncherError` naming the protocol and the command, never a hang.
The descriptor stays blocking (an MPI library in the process shares it):
writes take only what the socket holds now (``MSG_DONTWAIT``), or for a
descriptor that is not a socket at most ``PIPE_BUF`` bytes once it is
writable. After such an error the conversation is out of step,
so the world refuses further use.
"""

from __future__ import annotations

import atexit
import base64
import os
import select
import socket
import sys
import time
from collections.abc import Callable
from typing import NoReturn

from .._public import public
from ._interface import Closing, LauncherError, Locality, PeerNotice, WorldTimeout

#: Keys per rank and exchange, at most: with 1024-character values that is
#: some 750 KiB per entry, far above any pmca modex entry.
MAX_PARTS = 1000
#: Bytes of an answer read without finding its end before it is called garbage.
MAX_ANSWER = 1 << 20
_PREFIX = "pmca"

#: Given the bytes read so far, the length of the first complete message, or
#: ``None`` while it is incomplete; raises ``ValueError`` on garbage.
Framing = Callable[[bytes], "int | None"]


def node_of_ranks(mapping: str, size: int) -> list[int] | None:
    """The node of every rank from a ``PMI_process_mapping`` value, or ``None``.

    ``(vector,(start,nodes,per_node),...)``: ``per_node`` ranks on node
    ``start``, as many on ``start + 1``, ... for ``nodes`` nodes, then the
    next block; when every block is used the description starts over.
    """
    text = mapping.replace(" ", "")
    if not (text.startswith("(vector,") and text.endswith(")")):
        return None
    blocks = []
    for block in text[len("(vector,") : -1].split("),"):
        fields = block.strip("()").split(",")
        if len(fields) != 3 or not all(field.isdigit() for field in fields):
            return None
        blocks.append(tuple(int(field) for field in fields))
    nodes: list[int] = []
    while len(nodes) < size:
        before = len(nodes)
        for start, count, per_node in blocks:
            for node in range(start, start + count):
                nodes.extend([node] * per_node)
        if len(nodes) == before:
            return None
    return nodes[:size]


def _encode(data: bytes) -> str:
    return base64.b64encode(data).decode("ascii").rstrip("=")


def _decode(text: str) -> bytes:
    return base64.b64decode(text + "=" * (-len(text) % 4), validate=True)


class PmiConnection:
    """The launcher's descriptor: whole messages in and out, within deadlines.

    ``protocol`` (``"PMI"``, ``"PMI-1"``, ``"PMI-2"``) leads every error; it
    changes once the version is agreed.
    """

    def __init__(self, fd: int, protocol: str = "PMI") -> None:
        self.fd = fd
        self.protocol = protocol
        self.broken: str | None = None
        self.closed = False
        self._pending = b""

    def fail(self, what: str) -> NoReturn:
        self.broken = what
        raise LauncherError(f"{self.protocol}: {what}")

    def check_usable(self) -> None:
        if self.broken is not None:
            raise LauncherError(f"{self.protocol}: unusable after an earlier error ({self.broken})")
        if self.closed:
            raise LauncherError(f"{self.protocol}: the world is closed")

    def send(self, data: bytes, command: str, deadline: float) -> None:
        while data:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                self.fail(f"the launcher did not take {command!r} in time")
            try:
                _, writable, _ = select.select([], [self.fd], [], remaining)
                if writable:
                    data = data[write_some(self.fd, data) :]
            except OSError as exc:
                self.fail(f"cannot send {command!r} on PMI_FD={self.fd}: {exc}")

    def receive(self, command: str, framing: Framing, deadline: float, timeout: float) -> bytes:
        """The next whole message (as ``framing`` delimits it), the answer to ``command``."""
        while True:
            try:
                length = framing(self._pending)
            except ValueError as exc:
                self.fail(f"the answer to {command!r} is not {self.protocol} ({exc})")
            if length is not None:
                message, self._pending = self._pending[:length], self._pending[length:]
                return message
            if len(self._pending) > MAX_ANSWER:
                self.fail(f"the answer to {command!r} is not {self.protocol} (no end in 1 MiB)")
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                self.broken = f"{command!r} timed out"
                raise WorldTimeout(
                    f"{self.protocol}: no answer to {command!r} from the launcher within "
                    f"{timeout:g} s (pmca_base_modex_timeout)",
                    missing=[],
                )
            try:
                readable, _, _ = select.select([self.fd], [], [], remaining)
                chunk = os.read(self.fd, 65536) if readable else None
            except OSError as exc:
                self.fail(f"cannot read the answer to {command!r} on PMI_FD={self.fd}: {exc}")
            if chunk == b"":
                self.fail(f"the launcher closed PMI_FD={self.fd} before answering {command!r}")
            if chunk:
                self._pending += chunk

    def exchange(
        self,
        command: str,
        message: bytes,
        framing: Framing,
        parse: Callable[[str], dict[str, str]],
        answer: str,
        timeout: float,
    ) -> dict[str, str]:
        """Send ``message`` (the framed ``command``); the fields of the ``cmd=answer`` reply.

        A reply with ``rc`` other than 0 raises :class:`LauncherError` with the
        server's message; the conversation stays usable.
        """
        self.check_usable()
        deadline = time.monotonic() + timeout
        self.send(message, command, deadline)
        raw = self.receive(command, framing, deadline, timeout)
        try:
            text = raw.decode("ascii")
        except UnicodeDecodeError:
            self.fail(f"the answer to {command!r} is not {self.protocol}: {raw[:60]!r}")
        try:
            reply = parse(text)
        except ValueError as exc:
            self.fail(f"the answer to {command!r} is not {self.protocol} ({exc}): {text[:80]!r}")
        if reply.get("cmd") != answer:
            self.fail(f"the launcher answered {command!r} with {text[:80]!r}, not cmd={answer}")
        rc = reply.get("rc", "0")
        if rc != "0":
            message_text = reply.get("errmsg") or reply.get("msg") or reply.get("reason") or ""
            raise LauncherError(
                f"{self.protocol}: {command!r} failed with rc={rc} {message_text}".rstrip()
            )
        return reply


def write_some(fd: int, data: bytes) -> int:
    """Write what ``fd`` takes without blocking (it was found writable); bytes written."""
    try:
        sock = socket.socket(fileno=fd)
    except OSError:  # not a socket: a pipe takes PIPE_BUF bytes once writable
        return os.write(fd, data[: select.PIPE_BUF])
    try:
        return sock.send(data, socket.MSG_DONTWAIT)
    except BlockingIOError:
        return 0
    finally:
        sock.detach()  # the descriptor stays the launcher's


@public
class PmiWorld(Closing):
    """``rank``/``size``/``allgather``/``barrier`` over the launcher's PMI (1 or 2).

    The protocol's own commands come from the subclass: :meth:`_put`,
    :meth:`_fence`, :meth:`_get_value`, :meth:`_job_attribute`. A
    collective called without a timeout waits at most the world's
    ``timeout``: the one it was built with (``from_pmi(timeout=...)``).
    """

    #: ``"PMI-1"`` or ``"PMI-2"``.
    protocol = "PMI"
    #: The framed ``finalize`` sent at the process's exit.
    finalize_message = b""
    #: Why this version was chosen (``pmca_base_pmi_version``, the server's answer).
    why = ""

    def __init__(
        self, connection: PmiConnection, rank: int, size: int, key_max: int, value_max: int
    ) -> None:
        self._conn = connection
        self.rank = rank
        self.size = size
        self.key_max = key_max
        self.value_max = value_max
        self.description = f"{self.protocol} (rank {rank} of {size})"
        # Base64 characters per value: a multiple of 4 leaves no padding
        # mid-stream; room is left for the part count before the first, and
        # for the terminating NUL some servers count.
        self._part_chars = (value_max - len(f"{MAX_PARTS}.") - 1) // 4 * 4
        if self._part_chars < 4 or key_max < len(self._key(size, MAX_PARTS, 1 << 20)):
            connection.fail(
                f"the launcher's limits (keys of {key_max}, values of {value_max} "
                "characters) are too small for pmca's modex"
            )

    def _ready(self, timeout: float) -> None:
        """End of a subclass's ``__init__``: placement read, ``finalize`` at exit;
        ``timeout`` (what every command of the set-up waited) bounds collectives."""
        self.timeout = timeout
        self._locality = self._read_locality(timeout)
        fd = self._conn.fd
        if fd not in _finalizing:
            _finalizing.add(fd)
            atexit.register(_finalize_at_exit, fd, _identity(fd), self.finalize_message)

    # -- what each protocol provides ----------------------------------------

    def _put(self, key: str, value: str, timeout: float) -> None:
        raise NotImplementedError

    def _fence(self, timeout: float) -> None:
        raise NotImplementedError

    def _get_value(self, rank: int, key: str, timeout: float) -> str:
        raise NotImplementedError

    def _job_attribute(self, key: str, timeout: float) -> str | None:
        """A job attribute such as ``PMI_process_mapping``, ``None`` if the server has none."""
        raise NotImplementedError

    # -- the world ----------------------------------------------------------

    def _key(self, rank: int, part: int | str, exchange: int) -> str:
        return f"{_PREFIX}{exchange}-{rank}-{part}"

    def parts(self, data: bytes) -> list[str]:
        """``data`` as the values it is put in, or a :class:`LauncherError` if too large."""
        text = _encode(data)
        step = self._part_chars
        values = [text[i : i + step] for i in range(0, len(text), step)] or [""]
        if len(values) > MAX_PARTS:
            raise LauncherError(
                f"{self.protocol}: a modex entry of {len(data)} bytes needs {len(values)} "
                f"values of {self.value_max} characters; pmca puts at most {MAX_PARTS}"
            )
        return values

    def allgather(self, data: bytes, *, timeout: float | None = None) -> list[bytes]:
        limit = self._bound(timeout, f"{self.protocol} allgather")
        # Keys are never reused: the key-value space outlives this world, and
        # a later world of this process must not read this one's entries.
        fd = self._conn.fd
        _exchanges[fd] = exchange = _exchanges.get(fd, 0) + 1
        values = self.parts(bytes(data))
        # The number of parts leads the first value: one get finds it.
        values[0] = f"{len(values)}.{values[0]}"
        for part, value in enumerate(values):
            self._put(self._key(self.rank, part, exchange), value, limit)
        self._fence(limit)
        gathered = []
        for rank in range(self.size):
            gathered.append(bytes(data) if rank == self.rank else self._get(rank, exchange, limit))
        return gathered

    def _get(self, rank: int, exchange: int, timeout: float) -> bytes:
        first = self._get_value(rank, self._key(rank, 0, exchange), timeout)
        count_text, sep, text = first.partition(".")
        if not sep or not count_text.isdigit() or not 1 <= int(count_text) <= MAX_PARTS:
            raise LauncherError(
                f"{self.protocol}: rank {rank}'s modex entry is not pmca's ({first[:40]!r})"
            )
        pieces = [text]
        for part in range(1, int(count_text)):
            pieces.append(self._get_value(rank, self._key(rank, part, exchange), timeout))
        try:
            return _decode("".join(pieces))
        except ValueError as exc:
            raise LauncherError(
                f"{self.protocol}: rank {rank}'s modex entry is corrupt ({exc})"
            ) from None

    def barrier(self, *, timeout: float | None = None) -> None:
        self._fence(self._bound(timeout, f"{self.protocol} barrier"))

    def locality(self) -> Locality | None:
        return self._locality

    def _read_locality(self, timeout: float) -> Locality | None:
        """Placement from ``PMI_process_mapping`` (MPICH's Hydra serves it), if served."""
        mapping = self._job_attribute("PMI_process_mapping", timeout)
        nodes = None if mapping is None else node_of_ranks(mapping, self.size)
        if nodes is None:
            return None  # the modex's host ids decide
        mine = nodes[self.rank]
        hosts = tuple(f"node {node}" for node in nodes)
        return Locality(hosts, frozenset(r for r, node in enumerate(nodes) if node == mine))

    def notice_fd(self) -> int | None:
        return None  # PMI has no failure events: failures come from the btls

    def peer_notices(self) -> list[PeerNotice]:
        return []

    def close(self) -> None:
        """Stop using the launcher's descriptor (idempotent).

        ``finalize`` is sent at the process's exit instead (see
        :func:`_finalize_at_exit`): the descriptor belongs to the process, and
        an MPI library initialized before or after this world (MPICH's own PMI
        client) keeps talking on it after this world is closed.
        """
        self._conn.closed = True

    def __repr__(self) -> str:
        return f"<{type(self).__name__} {self.description}>"


_finalizing: set[int] = set()
#: Seconds the ``finalize`` at exit waits for the launcher to take it and answer.
_FINALIZE_WAIT = 5.0
#: Modex exchanges made so far on each launcher descriptor, by every world.
_exchanges: dict[int, int] = {}


def _mpi_owns_pmi() -> bool:
    """Whether an MPI library in this process was initialized (and so speaks PMI
    on the same descriptor and sends its own ``finalize``)."""
    mpi = sys.modules.get("mpi4py.MPI")
    if mpi is None:
        return False
    try:
        return bool(mpi.Is_initialized())
    except Exception:
        return True  # unsure: a second finalize would break the MPI library's


def _identity(fd: int) -> tuple[int, int] | None:
    try:
        status = os.fstat(fd)
    except OSError:
        return None
    return status.st_dev, status.st_ino


def _finalize_at_exit(fd: int, identity: tuple[int, int] | None, message: bytes) -> None:
    """Tell the launcher this process is done, unless an MPI library will.

    Hydra takes a process that exits without ``finalize`` for a failed one
    and kills the job's other processes. Nothing is written if the
    descriptor was closed and its number reused for another file.
    """
    if _mpi_owns_pmi() or identity is None or _identity(fd) != identity:
        return
    deadline = time.monotonic() + _FINALIZE_WAIT
    try:
        while message:
            _, writable, _ = select.select([], [fd], [], max(0.0, deadline - time.monotonic()))
            if not writable:
                return  # the launcher reads nothing: exit without waiting on it
            message = message[write_some(fd, message) :]
        readable, _, _ = select.select([fd], [], [], max(0.0, deadline - time.monotonic()))
        if readable:
            os.read(fd, 4096)  # the acknowledgement
    except OSError:
        pass  # the launcher is gone already: nothing left to tell it


def env_int(name: str) -> int:
    value = os.environ.get(name)
    if value is None:
        raise LauncherError(f"PMI: {name} is not set (is this process running under mpiexec?)")
    try:
        return int(value)
    except ValueError:
        raise LauncherError(f"PMI: {name}={value!r} is not an integer") from None
