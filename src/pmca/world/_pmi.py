"""A world from PMI-1, spoken over the launcher's file descriptor (``PMI_FD``).

MPICH's Hydra (``mpiexec``) and Slurm serve the PMI-1 wire protocol: lines of
``cmd=NAME key=value ...`` on a socket the launcher passes in ``PMI_FD``,
with ``PMI_RANK`` and ``PMI_SIZE`` in the environment. pmca speaks it in pure
Python, so a tool needs no MPI library to join its job.

The modex goes through the key-value space: each rank ``put``s its data,
everybody meets in ``barrier_in``/``barrier_out`` (which also publishes the
puts), then ``get``s every other rank's. Values are text without spaces,
``=`` or newlines and at most ``vallen_max`` characters (the server says how
many in ``get_maxes``): data is base64-encoded without padding and split
over as many keys as it needs.

Every read waits at most ``timeout`` seconds (``pmca_base_modex_timeout``): a
launcher that never answers, closes the descriptor, or answers something
that is not PMI gives a :class:`LauncherError` naming the command, never a
hang. After such an error the conversation is out of step, so the world
refuses further use.
"""

from __future__ import annotations

import atexit
import base64
import os
import select
import sys
import time

from ._interface import LauncherError, Locality, PeerNotice, WorldTimeout

#: Keys per rank and exchange, at most: with Hydra's 1024-character values
#: that is some 750 KiB per entry, far above any pmca modex entry.
MAX_PARTS = 1000
#: Seconds a single command waits when the caller gave no timeout.
DEFAULT_TIMEOUT = 60.0
_PREFIX = "pmca"


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


def _parse(line: str) -> dict[str, str]:
    fields: dict[str, str] = {}
    for token in line.split(" "):
        if not token:
            continue
        key, sep, value = token.partition("=")
        if not sep:
            raise ValueError(f"{token!r} is not key=value")
        fields[key] = value
    return fields


def _encode(data: bytes) -> str:
    return base64.b64encode(data).decode("ascii").rstrip("=")


def _decode(text: str) -> bytes:
    return base64.b64decode(text + "=" * (-len(text) % 4), validate=True)


class PmiWorld:
    """``rank``/``size``/``allgather``/``barrier`` over PMI-1 on ``PMI_FD``."""

    def __init__(self, fd: int, rank: int, size: int, *, timeout: float | None = None) -> None:
        if not 0 <= rank < size:
            raise LauncherError(f"PMI: rank {rank} is outside a job of size {size}")
        self.rank = rank
        self.size = size
        self._fd = fd
        self._pending = b""
        self._broken: str | None = None
        self._closed = False
        limit = DEFAULT_TIMEOUT if timeout is None else timeout
        reply = self._command(
            "init", {"pmi_version": "1", "pmi_subversion": "1"}, "response_to_init", limit
        )
        if reply.get("pmi_version") != "1":
            self._fail(f"the launcher speaks PMI version {reply.get('pmi_version')!r}, not 1")
        maxes = self._command("get_maxes", {}, "maxes", limit)
        try:
            self.key_max = int(maxes["keylen_max"])
            self.value_max = int(maxes["vallen_max"])
        except (KeyError, ValueError):
            self._fail(f"get_maxes answered {maxes!r}")
        self.appnum = int(self._command("get_appnum", {}, "appnum", limit).get("appnum", "0"))
        self.kvsname = self._command("get_my_kvsname", {}, "my_kvsname", limit).get("kvsname", "")
        if not self.kvsname:
            self._fail("get_my_kvsname named no key-value space")
        # Base64 characters per value: a multiple of 4 leaves no padding
        # mid-stream; room is left for the part count before the first, and
        # for the terminating NUL some servers count.
        self._part_chars = (self.value_max - len(f"{MAX_PARTS}.") - 1) // 4 * 4
        if self._part_chars < 4 or self.key_max < len(self._key(self.size, MAX_PARTS, 1 << 20)):
            self._fail(
                f"the launcher's limits (keys of {self.key_max}, values of {self.value_max} "
                "characters) are too small for pmca's modex"
            )
        self.description = f"PMI-1 (kvs {self.kvsname}, rank {rank} of {size})"
        self._locality = self._read_locality(limit)
        if fd not in _finalizing:
            _finalizing.add(fd)
            atexit.register(_finalize_at_exit, fd, _identity(fd))

    # -- the wire ---------------------------------------------------------

    def _fail(self, what: str) -> None:
        self._broken = what
        raise LauncherError(f"PMI: {what}")

    def _send(self, line: str, deadline: float) -> None:
        data = line.encode("ascii")
        command = line.split()[0].removeprefix("cmd=")
        while data:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                self._fail(f"the launcher did not take {command!r} in time")
            try:
                _, writable, _ = select.select([], [self._fd], [], remaining)
                if not writable:
                    continue
                data = data[os.write(self._fd, data) :]
            except OSError as exc:
                self._fail(f"cannot send {command!r} on PMI_FD={self._fd}: {exc}")

    def _read_line(self, command: str, deadline: float, timeout: float) -> str:
        while b"\n" not in self._pending:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise WorldTimeout(
                    f"PMI: no answer to {command!r} from the launcher within {timeout:g} s "
                    "(pmca_base_modex_timeout)",
                    missing=[],
                )
            try:
                readable, _, _ = select.select([self._fd], [], [], remaining)
                chunk = os.read(self._fd, 65536) if readable else None
            except OSError as exc:
                self._fail(f"cannot read the answer to {command!r} on PMI_FD={self._fd}: {exc}")
            if chunk == b"":
                self._fail(f"the launcher closed PMI_FD={self._fd} before answering {command!r}")
            if chunk:
                self._pending += chunk
            if len(self._pending) > 1 << 20:
                self._fail(f"the answer to {command!r} is not PMI (no end of line in 1 MiB)")
        line, _, self._pending = self._pending.partition(b"\n")
        try:
            return line.decode("ascii").strip()
        except UnicodeDecodeError:
            self._fail(f"the answer to {command!r} is not PMI: {line[:60]!r}")
            raise  # unreachable: _fail raises

    def _command(
        self, command: str, fields: dict[str, str], answer: str, timeout: float
    ) -> dict[str, str]:
        """Send ``cmd=command fields...`` and return the fields of the ``cmd=answer`` line."""
        if self._broken is not None:
            raise LauncherError(f"PMI: unusable after an earlier error ({self._broken})")
        if self._closed:
            raise LauncherError("PMI: the world is closed")
        deadline = time.monotonic() + timeout
        text = " ".join(f"{key}={value}" for key, value in fields.items())
        self._send(f"cmd={command} {text}".rstrip() + "\n", deadline)
        try:
            line = self._read_line(command, deadline, timeout)
        except WorldTimeout:
            self._broken = f"{command!r} timed out"
            raise
        try:
            reply = _parse(line)
        except ValueError as exc:
            self._fail(f"the answer to {command!r} is not PMI ({exc}): {line[:80]!r}")
        if reply.get("cmd") != answer:
            self._fail(f"the launcher answered {command!r} with {line[:80]!r}, not cmd={answer}")
        rc = reply.get("rc", "0")
        if rc != "0":
            message = reply.get("msg", "") or reply.get("reason", "")
            raise LauncherError(f"PMI: {command!r} failed with rc={rc} {message}".rstrip())
        return reply

    # -- the world --------------------------------------------------------

    def _key(self, rank: int, part: int | str, exchange: int) -> str:
        return f"{_PREFIX}{exchange}-{rank}-{part}"

    def parts(self, data: bytes) -> list[str]:
        """``data`` as the values it is put in, or a :class:`LauncherError` if too large."""
        text = _encode(data)
        step = self._part_chars
        values = [text[i : i + step] for i in range(0, len(text), step)] or [""]
        if len(values) > MAX_PARTS:
            raise LauncherError(
                f"PMI: a modex entry of {len(data)} bytes needs {len(values)} values of "
                f"{self.value_max} characters; pmca puts at most {MAX_PARTS}"
            )
        return values

    def allgather(self, data: bytes, *, timeout: float | None = None) -> list[bytes]:
        limit = DEFAULT_TIMEOUT if timeout is None else timeout
        # Keys are never reused: the key-value space outlives this world, and
        # a later world of this process must not read this one's entries.
        _exchanges[self._fd] = exchange = _exchanges.get(self._fd, 0) + 1
        values = self.parts(bytes(data))
        # The number of parts leads the first value: one get finds it.
        values[0] = f"{len(values)}.{values[0]}"
        for part, value in enumerate(values):
            fields = {"kvsname": self.kvsname, "key": self._key(self.rank, part, exchange)}
            fields["value"] = value
            self._command("put", fields, "put_result", limit)
        self._command("barrier_in", {}, "barrier_out", limit)
        gathered = []
        for rank in range(self.size):
            gathered.append(bytes(data) if rank == self.rank else self._get(rank, exchange, limit))
        return gathered

    def _get_value(self, rank: int, part: int, exchange: int, timeout: float) -> str:
        key = self._key(rank, part, exchange)
        reply = self._command("get", {"kvsname": self.kvsname, "key": key}, "get_result", timeout)
        if "value" not in reply:
            self._fail(f"get {key!r} answered no value")
        return reply["value"]

    def _get(self, rank: int, exchange: int, timeout: float) -> bytes:
        first = self._get_value(rank, 0, exchange, timeout)
        count_text, sep, text = first.partition(".")
        if not sep or not count_text.isdigit() or not 1 <= int(count_text) <= MAX_PARTS:
            raise LauncherError(f"PMI: rank {rank}'s modex entry is not pmca's ({first[:40]!r})")
        pieces = [text]
        for part in range(1, int(count_text)):
            pieces.append(self._get_value(rank, part, exchange, timeout))
        try:
            return _decode("".join(pieces))
        except ValueError as exc:
            raise LauncherError(f"PMI: rank {rank}'s modex entry is corrupt ({exc})") from None

    def barrier(self, *, timeout: float | None = None) -> None:
        limit = DEFAULT_TIMEOUT if timeout is None else timeout
        self._command("barrier_in", {}, "barrier_out", limit)

    def locality(self) -> Locality | None:
        return self._locality

    def _read_locality(self, timeout: float) -> Locality | None:
        """Placement from ``PMI_process_mapping`` (MPICH's Hydra serves it), if served."""
        try:
            reply = self._command(
                "get",
                {"kvsname": self.kvsname, "key": "PMI_process_mapping"},
                "get_result",
                timeout,
            )
        except LauncherError:
            if self._broken is not None:
                raise
            return None  # the server has no such key (rc != 0): the modex's host ids decide
        nodes = node_of_ranks(reply.get("value", ""), self.size)
        if nodes is None:
            return None
        mine = nodes[self.rank]
        hosts = tuple(f"node {node}" for node in nodes)
        return Locality(hosts, frozenset(r for r, node in enumerate(nodes) if node == mine))

    def notice_fd(self) -> int | None:
        return None

    def peer_notices(self) -> list[PeerNotice]:
        return []

    def close(self) -> None:
        """Stop using the launcher's descriptor (idempotent).

        ``finalize`` is sent at the process's exit instead (see
        :func:`_finalize_at_exit`): the descriptor belongs to the process, and
        an MPI library initialized before or after this world (MPICH's own PMI
        client) keeps talking on it after this world is closed.
        """
        self._closed = True

    def __repr__(self) -> str:
        return f"<PmiWorld {self.description}>"


_finalizing: set[int] = set()
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


def _finalize_at_exit(fd: int, identity: tuple[int, int] | None) -> None:
    """Tell the launcher this process is done, unless an MPI library will.

    Hydra takes a process that exits without ``finalize`` for a failed one
    and kills the job's other processes. Nothing is written if the
    descriptor was closed and its number reused for another file.
    """
    if _mpi_owns_pmi() or identity is None or _identity(fd) != identity:
        return
    try:
        os.write(fd, b"cmd=finalize\n")
        readable, _, _ = select.select([fd], [], [], 5.0)
        if readable:
            os.read(fd, 4096)  # cmd=finalize_ack
    except OSError:
        pass  # the launcher is gone already: nothing left to tell it


def _env_int(name: str) -> int:
    value = os.environ.get(name)
    if value is None:
        raise LauncherError(f"PMI: {name} is not set (is this process running under mpiexec?)")
    try:
        return int(value)
    except ValueError:
        raise LauncherError(f"PMI: {name}={value!r} is not an integer") from None


def from_pmi(*, timeout: float | None = None) -> PmiWorld:
    """A world from the PMI-1 server of the launcher (``PMI_FD``, ``PMI_RANK``, ``PMI_SIZE``).

    Every rank of the job must call it. ``timeout`` bounds each answer of
    the launcher (default 60 s). Call :meth:`PmiWorld.close` (a session that
    built the world itself does) before the process exits.
    """
    fd = _env_int("PMI_FD")
    try:
        os.fstat(fd)
    except OSError as exc:
        raise LauncherError(f"PMI: PMI_FD={fd} is not an open file descriptor ({exc})") from None
    return PmiWorld(fd, _env_int("PMI_RANK"), _env_int("PMI_SIZE"), timeout=timeout)
