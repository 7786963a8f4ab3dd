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
from pathlib import Path
from typing import Any

from ..session._job import job_identity
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
        help="print again every SECONDS (default 1) until interrupted",
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
    for path in sorted(live_directory(os.environ).glob(f"{job}.*.sock")):
        pid = socket_pid(path.name)
        # a socket whose process is gone was left by a rank killed before finalize
        if pid is not None and pid != os.getpid() and process_exists(pid):
            sockets.setdefault(pid, []).append(path)
    if not sockets:
        raise UsageError(f"--job {job}: no process of that job has a live view on this host")
    return dict(sorted(sockets.items()))


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


def run(args: argparse.Namespace) -> int:
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
    while True:
        documents, failed = [], 0
        for pid, paths in targets.items():
            try:
                documents.append(_read(pid, paths if paths is not None else _sockets_of(pid)))
            except _NobodyListens as exc:
                if pid in optional:
                    print(f"pmca stats: {exc}; skipped", file=sys.stderr)
                    continue
                print(f"pmca stats: {exc}", file=sys.stderr)
                failed += 1
            except StatsError as exc:
                print(f"pmca stats: {exc}", file=sys.stderr)
                failed += 1
        if args.json:
            print(json.dumps({"time": time.time(), "processes": documents}), flush=True)
        elif documents:
            print(table(documents, args.all), end="", flush=True)
        if args.watch is None:
            return 1 if failed else 0
        time.sleep(args.watch)
        if not args.json:
            print(flush=True)
