"""The live view: this process's pvars, readable by other processes of the same user.

A Unix stream socket named ``<job>.<rank>.<pid>.sock`` (or ``<pid>.sock``
outside a job) in ``$XDG_RUNTIME_DIR/pmca`` or, without that variable, in
``/tmp/pmca-<uid>`` (created with mode 0700, refused if another user owns
it or others may enter it). No file in ``/dev/shm``, no network port. Each
connection gets one JSON document of every pvar's value and is closed; a
peer whose ``SO_PEERCRED`` uid is not ours gets a refusal instead.

Opened by the first session when ``pmca_base_live_view`` says so (default
``auto``: only under a launcher, where a job's ranks are what tools want to
look at, and a lone program opens no socket it was not asked for), closed by
the last finalize. The server is one daemon thread; reading is what the
pvars' read callables cost, on that thread.

A process killed before its finalize leaves its socket behind, and process
ids are reused: opening a live view removes the sockets in the directory
whose process is gone, and any other socket bearing this process's id
(no live process can hold it). It never connects to decide: a socket being
opened by another starting rank would look dead for an instant.
"""

from __future__ import annotations

import contextlib
import json
import os
import socket
import stat
import struct
import threading
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from ..mca._errors import PmcaError
from ..mca._pvars import REGISTRY, Binding
from ..world._job import job_identity

__all__ = ["LiveView", "live_directory", "process_exists", "remove_stale", "snapshot", "socket_pid"]

_CRED = struct.Struct("3i")  # struct ucred: pid, uid, gid


def live_directory(env: Mapping[str, str], uid: int | None = None) -> Path:
    """Where the sockets of ``uid`` (default: ours) are."""
    uid = os.getuid() if uid is None else uid
    runtime = env.get("XDG_RUNTIME_DIR")
    if runtime and uid == os.getuid():
        return Path(runtime) / "pmca"
    return Path(f"/tmp/pmca-{uid}")


def _private_directory(path: Path) -> Path:
    """``path``, created 0700, or refused if it is not ours alone."""
    try:
        path.mkdir(mode=0o700, parents=False)
    except FileExistsError:
        pass
    except FileNotFoundError:
        path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
        path.mkdir(mode=0o700, exist_ok=True)
    info = path.lstat()
    if not stat.S_ISDIR(info.st_mode) or info.st_uid != os.getuid() or info.st_mode & 0o077:
        raise PmcaError(
            f"live view: {path} is not a directory private to uid {os.getuid()} "
            f"(owner uid {info.st_uid}, mode {stat.filemode(info.st_mode)}); "
            f"remove it or set pmca_base_live_view=off"
        )
    return path


def socket_pid(name: str) -> int | None:
    """The process id a live view socket's name carries (None: not such a name)."""
    if not name.endswith(".sock"):
        return None
    last = name[: -len(".sock")].rsplit(".", 1)[-1]
    return int(last) if last.isdigit() else None


def process_exists(pid: int) -> bool:
    """Whether process ``pid`` exists in this pid namespace (it may be another's now)."""
    return os.path.exists(f"/proc/{pid}")


def remove_stale(directory: Path, pid: int) -> list[Path]:
    """Remove the sockets of processes that are gone, and others bearing ``pid``."""
    removed = []
    for path in directory.glob("*.sock"):
        owner = socket_pid(path.name)
        if owner is not None and (owner == pid or not process_exists(owner)):
            with contextlib.suppress(FileNotFoundError):  # another rank removed it first
                path.unlink()
                removed.append(path)
    return removed


def _label(obj: Any, index: int) -> str:
    return str(obj) if isinstance(obj, int | str) else f"{type(obj).__name__}#{index}"


def snapshot() -> dict[str, Any]:
    """Every pvar's value now (bound ones per object), as the live view sends it."""
    values: dict[str, Any] = {}
    for pvar in REGISTRY.pvars():
        for _attempt in range(3):  # a producer's dict may change size under our read
            try:
                if pvar.binding is Binding.NONE:
                    values[pvar.name] = REGISTRY.read(pvar.name)
                else:
                    objects = REGISTRY.objects(pvar.name)
                    values[pvar.name] = {
                        _label(obj, i): REGISTRY.read(pvar.name, obj)
                        for i, obj in enumerate(objects)
                    }
                break
            except RuntimeError:
                continue
            except Exception as exc:  # one producer must not hide the others
                values[pvar.name] = f"error: {type(exc).__name__}: {exc}"
                break
    return values


class LiveView:
    """The socket and its server thread."""

    def __init__(self, env: Mapping[str, str]) -> None:
        directory = _private_directory(live_directory(env))
        job = job_identity(env)
        pid = os.getpid()
        name = f"{job[0]}.{job[1]}.{pid}.sock" if job else f"{pid}.sock"
        self.path = directory / name
        self.job = job
        #: Other names of this process's job: what its worlds call it (Hydra's
        #: kvs name, a PMI-2 or PMIx job id), so ``pmca stats --job`` takes them too.
        self.aliases: tuple[str, ...] = ()
        remove_stale(directory, pid)  # our own name among them
        self._sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self._sock.bind(str(self.path))
        os.chmod(self.path, 0o600)
        self._sock.listen(8)
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._serve, name="pmca-live-view", daemon=True)
        self._thread.start()

    def _serve(self) -> None:
        while not self._stop.is_set():
            try:
                conn, _ = self._sock.accept()
            except OSError:
                return  # closed
            with conn:
                try:
                    self._answer(conn)
                except OSError:
                    continue

    def _answer(self, conn: socket.socket) -> None:
        pid, uid, _gid = _CRED.unpack(
            conn.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, _CRED.size)
        )
        if uid != os.getuid():
            document: dict[str, Any] = {
                "error": f"refused: process {os.getpid()} belongs to uid {os.getuid()}; "
                f"the reader (pid {pid}) runs as uid {uid}"
            }
        else:
            document = {"pid": os.getpid(), "pvars": snapshot()}
            if self.job is not None:
                document["job"], document["rank"] = self.job
            if self.aliases:
                document["aliases"] = list(self.aliases)
        conn.sendall(json.dumps(document).encode())

    def also_known_as(self, job: str) -> None:
        """``job`` names this process's job too (a world's name for it)."""
        if (self.job is None or job != self.job[0]) and job not in self.aliases:
            self.aliases = (*self.aliases, job)

    def close(self) -> None:
        self._stop.set()
        with contextlib.suppress(OSError):  # wakes the accept
            self._sock.shutdown(socket.SHUT_RDWR)
        self._sock.close()
        self._thread.join(timeout=5)
        self.path.unlink(missing_ok=True)
