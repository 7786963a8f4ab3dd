"""``pmca stats PID...``: the pvars of running pmca processes, through their live view.

A process shows up when its ``pmca_base_live_view`` is on (by default:
under a launcher). A process of another user is refused, by this command
(it looks at who owns the process) and by the process itself (it checks
the reader's ``SO_PEERCRED``).
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import sys
import time
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from .._job import job_identity
from ..session._live import live_directory, process_exists, socket_pid
from ._errors import UsageError

__all__ = ["add_arguments", "run"]


class StatsError(Exception):
    """One process could not be read; the message says why."""


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.description = (
        "Print the performance variables of running pmca processes of this user "
        "(those with pmca_base_live_view on: by default, the ranks of a job)."
    )
    parser.add_argument("pids", nargs="*", type=int, metavar="PID", help="processes to read")
    parser.add_argument(
        "--list",
        action="store_true",
        help="list the live pmca processes of this user on this host (job, rank, pid) "
        "without reading them",
    )
    parser.add_argument(
        "--job",
        nargs="?",
        const="",
        default=None,
        metavar="ID",
        help="every rank of job ID on this host (default: this environment's job, "
        "from PMIX_NAMESPACE, SLURM_JOB_ID or Hydra's PMI_RANK)",
    )
    parser.add_argument(
        "--watch",
        nargs="?",
        const=1.0,
        type=float,
        default=None,
        metavar="SECONDS",
        help="print again every SECONDS (default 1) until interrupted or every "
        "process read has ended",
    )
    parser.add_argument("--json", action="store_true", help="one JSON document per read")
    parser.add_argument(
        "--all", action="store_true", help="also show pvars whose value is zero everywhere"
    )


def _owner(pid: int) -> int:
    try:
        return os.stat(f"/proc/{pid}").st_uid
    except FileNotFoundError:
        raise StatsError(f"process {pid}: no such process") from None


def _sockets_of(pid: int) -> list[Path]:
    uid = _owner(pid)
    if uid != os.getuid():
        raise StatsError(
            f"process {pid}: refused: it belongs to uid {uid}, and pmca stats reads "
            f"only processes of its own user (uid {os.getuid()})"
        )
    # Root reads its own processes; for other users, the process itself refuses.
    found = [
        path
        for directory in {live_directory(os.environ), live_directory({}, uid)}
        for path in directory.glob(f"*{pid}.sock")
        if socket_pid(path.name) == pid
    ]
    if not found:
        raise StatsError(
            f"process {pid}: no live view (is it a pmca process with a session open and "
            f"pmca_base_live_view=on, or under a launcher?)"
        )
    return found


class _NobodyListens(StatsError):
    """The socket is there but no process listens on it (left by one that was killed)."""


def read_socket(path: Path, pid: int, timeout: float = 10.0) -> dict[str, Any]:
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
        sock.settimeout(timeout)
        chunks = []
        try:
            sock.connect(str(path))
            while chunk := sock.recv(1 << 16):
                chunks.append(chunk)
        except (ConnectionRefusedError, FileNotFoundError):
            raise _NobodyListens(
                f"process {pid}: nobody listens on {path.name} (left by a process that "
                f"ended without finalizing, or one that just finalized)"
            ) from None
        except OSError as exc:
            raise StatsError(f"process {pid}: reading {path.name}: {exc}") from None
    document: dict[str, Any] = json.loads(b"".join(chunks))
    if "error" in document:
        raise StatsError(f"process {pid}: {document['error']}")
    return document


def _read(pid: int, paths: list[Path]) -> dict[str, Any]:
    """The first of ``paths`` (sockets bearing ``pid``) a process answers on."""
    refused: _NobodyListens | None = None
    for path in paths:
        try:
            return read_socket(path, pid)
        except _NobodyListens as exc:  # an older process's socket: ids are reused
            refused = exc
    assert refused is not None
    raise refused


def _job_sockets(job: str) -> dict[int, list[Path]]:
    if not job:
        identity = job_identity(os.environ)
        if identity is None:
            raise UsageError(
                "--job without an ID needs a launcher's environment "
                "(PMIX_NAMESPACE, SLURM_JOB_ID or PMI_RANK); give the job ID"
            )
        job = identity[0]
    sockets: dict[int, list[Path]] = {}
    for named, _, pid, path in live_processes((live_directory(os.environ),)):
        if named == job:
            sockets.setdefault(pid, []).append(path)
    if not sockets:
        sockets = _sockets_known_as(job)
    if not sockets:
        raise UsageError(f"--job {job}: no process of that job has a live view on this host")
    return dict(sorted(sockets.items()))


def _sockets_known_as(job: str) -> dict[int, list[Path]]:
    """The live views whose world calls the job ``job`` (each one is asked)."""
    found: dict[int, list[Path]] = {}
    for _, _, pid, path in live_processes():
        try:
            document = read_socket(path, pid, timeout=2.0)
        except StatsError:
            continue
        if job in document.get("aliases", ()):
            found.setdefault(pid, []).append(path)
    return found


def _rows(documents: list[dict[str, Any]], show_all: bool) -> list[tuple[str, list[str]]]:
    names = sorted({name for doc in documents for name in doc["pvars"]})
    rows: list[tuple[str, list[str]]] = []
    for name in names:
        values = [doc["pvars"].get(name) for doc in documents]
        if any(isinstance(v, dict) for v in values):
            keys = sorted({k for v in values if isinstance(v, dict) for k in v}, key=str)
            for key in keys:
                cells = [v.get(key, "") if isinstance(v, dict) else "" for v in values]
                rows.append((f"{name}[{key}]", [_cell(c) for c in cells]))
        else:
            rows.append((name, [_cell(v) for v in values]))
    if not show_all:
        rows = [row for row in rows if any(c not in ("0", "0.0", "") for c in row[1])]
    return rows


def _cell(value: Any) -> str:
    if value is None:
        return ""
    if isinstance(value, float):
        return f"{value:.6g}"
    return str(value)


def table(documents: list[dict[str, Any]], show_all: bool = False) -> str:
    heads = [
        f"rank {doc['rank']} ({doc['pid']})" if "rank" in doc else f"pid {doc['pid']}"
        for doc in documents
    ]
    rows = _rows(documents, show_all)
    first = max([len("pvar"), *(len(name) for name, _ in rows)])
    widths = [max([len(h), *(len(cells[i]) for _, cells in rows)]) for i, h in enumerate(heads)]
    lines = [
        "  ".join(
            [f"{'pvar':<{first}}", *(f"{h:>{w}}" for h, w in zip(heads, widths, strict=True))]
        )
    ]
    for name, cells in rows:
        lines.append(
            "  ".join(
                [f"{name:<{first}}", *(f"{c:>{w}}" for c, w in zip(cells, widths, strict=True))]
            )
        )
    return "\n".join(lines) + "\n"


def live_processes(
    directories: Iterable[Path] | None = None,
) -> list[tuple[str | None, int | None, int, Path]]:
    """``(job, rank, pid, socket)`` of every live view of this user on this host, by job.

    Read from the sockets' names (``<job>.<rank>.<pid>.sock`` or ``<pid>.sock``)
    in ``directories`` (default: the live view's under this environment and
    without it): nothing is connected to; a socket whose process is gone (left
    by a process killed before its finalize) is left out.
    """
    found = []
    if directories is None:
        directories = {live_directory(os.environ), live_directory({}, os.getuid())}
    for directory in sorted(directories):
        for path in directory.glob("*.sock"):
            pid = socket_pid(path.name)
            if pid is None or pid == os.getpid() or not process_exists(pid):
                continue
            parts = path.name[: -len(".sock")].rsplit(".", 2)
            job, rank = (parts[0], int(parts[1])) if len(parts) == 3 else (None, None)
            found.append((job, rank, pid, path))
    return sorted(found, key=lambda p: (p[0] or "", p[1] if p[1] is not None else -1, p[2]))


def _list(as_json: bool) -> int:
    processes = live_processes()
    if as_json:
        entries = [
            {"job": job, "rank": rank, "pid": pid, "socket": str(path)}
            for job, rank, pid, path in processes
        ]
        print(json.dumps({"processes": entries}))
        return 0
    if not processes:
        where = live_directory(os.environ)
        print(f"no live pmca process of uid {os.getuid()} on this host (live views in {where})")
        return 0
    width = max(len("job"), *(len(job or "-") for job, _, _, _ in processes))
    print(f"{'job':<{width}}  {'rank':>4}  pid")
    for job, rank, pid, _ in processes:
        print(f"{job or '-':<{width}}  {'-' if rank is None else rank:>4}  {pid}")
    return 0


_ALL_ENDED = "pmca stats: every process watched has ended or closed its live view"


def _gone(pid: int) -> str:
    return "has ended" if not process_exists(pid) else "closed its live view"


def _ended(targets: dict[int, list[Path] | None]) -> bool:
    """Drop the watched processes that have ended, saying so; whether none is left."""
    for pid in [pid for pid in targets if not process_exists(pid)]:
        print(f"pmca stats: process {pid} has ended", file=sys.stderr)
        del targets[pid]
    if targets:
        return False
    print(_ALL_ENDED, file=sys.stderr)
    return True


def run(args: argparse.Namespace) -> int:
    if args.list:
        if args.pids or args.job is not None or args.watch is not None:
            raise UsageError("pmca stats: --list takes no PID, --job or --watch")
        return _list(args.json)
    #: pid -> its sockets (None: find them at each read); the job's are optional:
    #: a socket nobody listens on there is an older process's, skipped with a note
    targets: dict[int, list[Path] | None] = dict.fromkeys(args.pids)
    optional: set[int] = set()
    if args.job is not None:
        for pid, found in _job_sockets(args.job).items():
            if pid not in targets:
                targets[pid] = found
                optional.add(pid)
    if not targets:
        raise UsageError("pmca stats: give one or more PIDs, or --job")
    read_once: set[int] = set()
    while True:
        documents, failed = [], 0
        for pid, paths in list(targets.items()):
            try:
                documents.append(_read(pid, paths if paths is not None else _sockets_of(pid)))
                read_once.add(pid)
            except StatsError as exc:
                if args.watch is not None and pid in read_once:
                    # Watched and read before: it finalized or is exiting, not an error.
                    del targets[pid]
                    print(f"pmca stats: process {pid} {_gone(pid)}", file=sys.stderr)
                    continue
                if isinstance(exc, _NobodyListens) and pid in optional:
                    print(f"pmca stats: {exc}; skipped", file=sys.stderr)
                    continue
                print(f"pmca stats: {exc}", file=sys.stderr)
                failed += 1
        if args.json:
            print(json.dumps({"time": time.time(), "processes": documents}), flush=True)
        elif documents:
            print(table(documents, args.all), end="", flush=True)
        if args.watch is None:
            return 1 if failed else 0
        if not targets:
            print(_ALL_ENDED, file=sys.stderr)
            return 1 if failed else 0
        time.sleep(args.watch)
        if _ended(targets):
            return 1 if failed else 0
        if not args.json:
            print(flush=True)
