"""Linux namespaces for the simulated cluster: made, entered, listed and removed.

Network namespaces are made and named with iproute2 (``ip netns``, files
under ``/run/netns``) so ``ip -n NAME`` and ``tc -n NAME`` reach them; a
host's UTS namespace (its own hostname) is pinned by a bind mount of its
``/proc/PID/ns/uts`` onto a file in the run's state directory, made here
with the system calls themselves.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import shutil
import signal
import subprocess
from collections.abc import Sequence
from pathlib import Path
from typing import TypeGuard

from .._public import public

CLONE_NEWUTS = 0x04000000
CLONE_NEWNET = 0x40000000
_MS_BIND = 4096
_MNT_DETACH = 2
NETNS_DIR = Path("/run/netns")
#: Every run's state (UTS namespace files, the ssh stand-in, its host map).
STATE_ROOT = Path("/run/pmca-testbed")
#: Names of everything a run makes start with this, then the owner's pid.
PREFIX = "pmca-"

_libc = ctypes.CDLL(None, use_errno=True)


@public
class TestbedUnavailable(RuntimeError):
    """The simulated cluster cannot be built here (not root, no iproute2, ...)."""

    __test__ = False  # not a pytest test class, whatever its name


def _check(result: int, what: str) -> None:
    if result != 0:
        err = ctypes.get_errno()
        raise OSError(err, f"{what}: {os.strerror(err)}")


@public
def testbed_requirements() -> str | None:
    """Why the testbed cannot run here, or ``None`` if it can."""
    if os.geteuid() != 0:
        return (
            "the simulated cluster needs root: it creates network and UTS namespaces, "
            "bridges, veth links and tc qdiscs (run the tests as root)"
        )
    missing = [tool for tool in ("ip", "tc") if shutil.which(tool) is None]
    if missing:
        return f"the simulated cluster needs iproute2 ({', '.join(missing)} not found on PATH)"
    return None


#: Its name inside the package (pmca.testing exports it as ``testbed_requirements``).
requirements = testbed_requirements


def run(*argv: str) -> None:
    """Run one iproute2 command; a failure names the command and what it printed."""
    done = subprocess.run(argv, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise TestbedUnavailable(f"{' '.join(argv)} failed: {done.stderr.strip()}")


def enter(path: str | os.PathLike[str], kind: int) -> None:
    """Move this process (or thread) into the namespace pinned at ``path``."""
    fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
    try:
        _check(_libc.setns(fd, kind), f"setns {path}")
    finally:
        os.close(fd)


def make_uts(path: Path, hostname: str) -> None:
    """Create a UTS namespace whose hostname is ``hostname``, pinned at ``path``."""
    path.touch()
    ready_read, ready_write = os.pipe()
    done_read, done_write = os.pipe()
    child = os.fork()
    if child == 0:  # pragma: no cover - runs in the child
        try:
            os.close(ready_read)
            os.close(done_write)
            _check(_libc.unshare(CLONE_NEWUTS), "unshare(CLONE_NEWUTS)")
            name = hostname.encode()
            _check(_libc.sethostname(name, len(name)), "sethostname")
            os.write(ready_write, b"1")
            os.read(done_read, 1)
        finally:
            os._exit(0)
    os.close(ready_write)
    os.close(done_read)
    try:
        if os.read(ready_read, 1) != b"1":
            raise TestbedUnavailable(f"could not make a UTS namespace for {hostname!r}")
        source = f"/proc/{child}/ns/uts".encode()
        _check(_libc.mount(source, bytes(path), None, _MS_BIND, None), f"bind mount {path}")
    finally:
        os.close(done_write)
        os.close(ready_read)
        os.waitpid(child, 0)


def unpin(path: Path) -> None:
    """Remove a bind-mounted namespace file (the namespace ends with its last user)."""
    _libc.umount2(bytes(path), _MNT_DETACH)
    path.unlink(missing_ok=True)


def namespace_id(path: str | os.PathLike[str]) -> tuple[int, int]:
    """(device, inode): what ``/proc/PID/ns/net`` of a member process also shows."""
    found = os.stat(path)
    return found.st_dev, found.st_ino


def members(path: str | os.PathLike[str]) -> list[int]:
    """Processes in the network namespace pinned at ``path`` (none of them this one)."""
    wanted = namespace_id(path)
    found: list[int] = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit() or int(entry) == os.getpid():
            continue
        try:
            if namespace_id(f"/proc/{entry}/ns/net") == wanted:
                found.append(int(entry))
        except OSError:
            continue  # gone, or a kernel thread
    return found


def signal_all(pids: Sequence[int], signum: int) -> None:
    for pid in pids:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signum)


def stat_fields(pid: int) -> list[str] | None:
    """The fields of ``/proc/PID/stat`` after the command name (state, ppid, pgrp,
    session, ...); ``None`` once ``pid`` is gone."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()
    except (OSError, IndexError):
        return None


def running(fields: list[str] | None) -> TypeGuard[list[str]]:
    """Whether the process of :func:`stat_fields` ``fields`` has not ended (a zombie has)."""
    return fields is not None and fields[0] not in ("Z", "X")


def start_time(pid: int) -> str | None:
    """The kernel's start time of ``pid`` (tells a live owner from a reused pid)."""
    fields = stat_fields(pid)
    return fields[19] if fields is not None and len(fields) > 19 else None


def remove_netns(name: str) -> None:
    """Kill what still runs in network namespace ``name``, then delete it."""
    path = NETNS_DIR / name
    if path.exists():
        with contextlib.suppress(OSError):
            signal_all(members(path), signal.SIGKILL)
    subprocess.run(["ip", "netns", "delete", name], capture_output=True, check=False)


def remove_stale() -> list[str]:
    """Remove what runs whose owner died left behind (SIGKILL of a test run); return tags."""
    tags: set[str] = set()
    if STATE_ROOT.is_dir():
        tags.update(p.name for p in STATE_ROOT.iterdir() if p.name.startswith(PREFIX))
    if NETNS_DIR.is_dir():
        tags.update(
            "-".join(p.name.split("-")[:3])
            for p in NETNS_DIR.iterdir()
            if p.name.startswith(PREFIX)
        )
    removed = []
    for tag in sorted(tags):
        if owner_alive(tag):
            continue
        remove_run(tag)
        removed.append(tag)
    return removed


def owner_alive(tag: str) -> bool:
    """Whether the process that made run ``tag`` (``pmca-PID-SEQ``) still runs."""
    try:
        pid = int(tag.split("-")[1])
    except (IndexError, ValueError):
        return False
    started = start_time(pid)
    if started is None:
        return False
    recorded = STATE_ROOT / tag / "owner"
    try:
        return recorded.read_text().split()[1] == started
    except (OSError, IndexError):
        return True  # being made right now: its state is not written yet


def remove_run(tag: str) -> None:
    """Remove every namespace, mount and file of run ``tag``."""
    if NETNS_DIR.is_dir():
        for path in NETNS_DIR.iterdir():
            if path.name.startswith(tag + "-"):
                remove_netns(path.name)
    state = STATE_ROOT / tag
    if state.is_dir():
        for path in state.glob("*.uts"):
            unpin(path)
        shutil.rmtree(state, ignore_errors=True)


__all__ = [
    "CLONE_NEWNET",
    "CLONE_NEWUTS",
    "PREFIX",
    "STATE_ROOT",
    "TestbedUnavailable",
    "enter",
    "make_uts",
    "members",
    "namespace_id",
    "remove_run",
    "remove_stale",
    "requirements",
    "run",
    "running",
    "signal_all",
    "start_time",
    "stat_fields",
    "unpin",
]
