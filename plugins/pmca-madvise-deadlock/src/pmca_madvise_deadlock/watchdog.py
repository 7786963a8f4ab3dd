"""Run the workload in a child under mimalloc; if it hangs, read where from its native state.

No Python traceback is involved: a hung child is examined through
``/proc/<pid>/task/*/syscall`` (which thread sleeps in ``futex`` and on
which address), ``wchan``, and the mutex itself read from
``/proc/<pid>/mem`` (glibc keeps the owner's thread id in it).  A thread
that waits on ``mm_lock`` while ``mm_lock``'s owner is that same thread is
the self-deadlock.  When gdb is installed, its native backtrace of that
thread is added.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import struct
import subprocess
import sys
import threading
from collections.abc import Mapping
from typing import Any

from . import child_environment

#: x86_64 system call number of futex, as /proc/<pid>/task/<tid>/syscall shows it.
SYS_FUTEX = 202
#: Byte offset of ``__owner`` (the owning thread id) in glibc's pthread_mutex_t.
MUTEX_OWNER_OFFSET = 8


def _read(path: str) -> str:
    try:
        with open(path) as handle:
            return handle.read().strip()
    except OSError as exc:
        return f"<{exc.strerror}>"


def threads_of(pid: int) -> list[dict[str, Any]]:
    """Each thread's id, name, current system call and wait channel."""
    found = []
    for tid in sorted(os.listdir(f"/proc/{pid}/task"), key=int):
        base = f"/proc/{pid}/task/{tid}"
        syscall = _read(f"{base}/syscall").split()
        found.append(
            {
                "tid": int(tid),
                "comm": _read(f"{base}/comm"),
                "syscall": int(syscall[0]) if syscall and syscall[0].isdigit() else None,
                "futex": int(syscall[1], 16) if len(syscall) > 1 and syscall[0] == "202" else None,
                "wchan": _read(f"{base}/wchan"),
            }
        )
    return found


def mutex_owner(pid: int, address: int) -> int | None:
    """The thread id glibc recorded as the owner of the mutex at ``address``."""
    try:
        with open(f"/proc/{pid}/mem", "rb") as memory:
            memory.seek(address + MUTEX_OWNER_OFFSET)
            return int(struct.unpack("<i", memory.read(4))[0])
    except OSError:
        return None


def gdb_backtrace(pid: int, tid: int) -> str | None:
    """gdb's native backtrace of one thread, if gdb is installed and allowed."""
    return gdb_backtraces(pid, [tid]).get(tid)


def gdb_backtraces(pid: int, tids: list[int]) -> dict[int, str]:
    """gdb's native backtraces of some threads (one gdb run), if gdb is installed and allowed."""
    gdb = shutil.which("gdb")
    if gdb is None:
        return {}
    try:
        done = subprocess.run(
            [gdb, "-batch", "-nx", "-p", str(pid), "-ex", "thread apply all bt 25"],
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        )
    except subprocess.TimeoutExpired:
        return {}
    found = {}
    for block in done.stdout.split("\nThread "):
        for tid in tids:
            if f"LWP {tid})" in block.split("\n", 1)[0]:
                found[tid] = "Thread " + block.strip()
    return found


def examine(pid: int, lock: int | None, *, with_gdb: bool) -> dict[str, Any]:
    """Where a hung child is stuck, from its native state."""
    threads = threads_of(pid)
    owner = mutex_owner(pid, lock) if lock is not None else None
    waiters = [t["tid"] for t in threads if lock is not None and t["futex"] == lock]
    report: dict[str, Any] = {
        "threads": threads,
        "mm_lock": lock,
        "owner": owner,
        "waiters": waiters,
        "self_deadlock": owner is not None and owner in waiters,
        # Where mm_lock's owner sleeps, when not on mm_lock (glibc: an arena lock).
        "owner_futex": next(
            (t["futex"] for t in threads if owner is not None and t["tid"] == owner), None
        ),
    }
    if with_gdb and report["self_deadlock"] and owner is not None:
        report["backtrace"] = gdb_backtrace(pid, owner)
    elif with_gdb and owner is not None:
        # Another cycle: mm_lock's owner sleeps on some other lock.  The
        # owner's and the waiters' stacks say which lock and who holds it.
        traces = gdb_backtraces(pid, [owner, *waiters])
        report["backtraces"] = {str(tid): trace for tid, trace in traces.items()}
    return report


def run_once(
    design: str,
    seconds: float,
    *,
    grace: float = 10.0,
    threads: int = 4,
    with_gdb: bool = True,
    env: Mapping[str, str] | None = None,
) -> dict[str, Any]:
    """One child; ``completed`` or ``hung`` (with :func:`examine`'s report).

    ``env`` replaces this process's environment (mimalloc's settings are added).
    """
    env = {**(os.environ if env is None else env), **child_environment()}
    child = subprocess.Popen(
        [sys.executable, "-m", "pmca_madvise_deadlock", design, str(seconds), str(threads)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
    )
    lines: list[dict[str, Any]] = []

    def collect() -> None:
        assert child.stdout is not None
        for line in child.stdout:
            if line.startswith("{"):
                lines.append(json.loads(line))

    reader = threading.Thread(target=collect, daemon=True)
    reader.start()
    try:
        child.wait(seconds + grace)
    except subprocess.TimeoutExpired:
        lock = next((line["mm_lock"] for line in lines if "mm_lock" in line), None)
        report = examine(child.pid, lock, with_gdb=with_gdb)
        for line in lines:
            report.update({k: v for k, v in line.items() if k in ("allocator", "malloc_from")})
        child.send_signal(signal.SIGKILL)
        child.wait()
        return {"design": design, "outcome": "hung", **report}
    finally:
        reader.join(5)
    stderr = child.stderr.read() if child.stderr is not None else ""
    done = next((line for line in lines if line.get("completed")), None)
    if child.returncode == 0 and done is not None:
        kept = ("coherent", "hook_calls", "allocator", "malloc_from", "monitor_events")
        facts = {k: v for line in lines for k, v in line.items() if k in kept}
        return {"design": design, "outcome": "completed", **done, **facts}
    last = stderr.strip().splitlines()[-1:] if stderr.strip() else []
    return {"design": design, "outcome": "failed", "returncode": child.returncode, "why": last}


def main() -> None:
    """``python -m pmca_madvise_deadlock.watchdog DESIGN RUNS SECONDS``: a rate."""
    design, runs, seconds = sys.argv[1], int(sys.argv[2]), float(sys.argv[3])
    threads = int(sys.argv[4]) if len(sys.argv) > 4 else 4
    hung = deadlocked = 0
    for number in range(runs):
        result = run_once(design, seconds, threads=threads, with_gdb=deadlocked == 0)
        hung += result["outcome"] == "hung"
        deadlocked += bool(result.get("self_deadlock"))
        summary = {k: result.get(k) for k in ("outcome", "owner", "waiters", "self_deadlock")}
        print(json.dumps({"run": number + 1, **summary}), flush=True)
        if result.get("backtrace"):
            print(result["backtrace"], flush=True)
    print(json.dumps({"design": design, "runs": runs, "hung": hung, "self_deadlock": deadlocked}))


if __name__ == "__main__":
    main()
