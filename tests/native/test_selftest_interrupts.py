"""Ctrl-C inside the self-test never leaks what the self-test created.

The shmdt probe creates a SysV segment: unless it is marked for removal
before anything can interrupt, an interrupt leaves a segment that outlives
the process. Both the self-test and the libc helper that makes the segment
(also used by ``pmca doctor``'s coverage) are interrupted at random points,
many times; after the child exited, ``ipcs -m -p`` (or ``/proc/sysvipc/shm``) must list no
segment created by it. Matching the creator's pid, rather than comparing
whole listings, keeps other processes on the machine out of the result.
"""

from __future__ import annotations

import json
import random
import shutil
import subprocess
from pathlib import Path

import pytest

from pmca.testing import run_python

ITERATIONS = 400

CHILD = """
import json, os, random, signal, statistics, time
# SIGINT raises KeyboardInterrupt only if it was not ignored when Python
# started: a test run launched in the background inherits it ignored.
signal.signal(signal.SIGINT, signal.default_int_handler)
import pmca
from pmca._libc import libc

rng = random.Random({seed})
armed = [False]
def on_alarm(signum, frame):
    if armed[0]:
        armed[0] = False
        os.kill(os.getpid(), signal.SIGINT)
signal.signal(signal.SIGALRM, on_alarm)

session = pmca.Session(frameworks=["memory"]).init()
handle = pmca.memory.register_release(lambda *event: None)
timings = []
for _ in range(5):
    start = time.perf_counter()
    assert pmca.native.self_test(["shmdt"]) == {{"shmdt": True}}
    timings.append(time.perf_counter() - start)
typical = statistics.median(timings)
interrupted = 0
for _ in range({iterations}):
    try:
        armed[0] = True
        signal.setitimer(signal.ITIMER_REAL, rng.uniform(1e-6, typical * 1.5))
        if rng.random() < 0.5:
            pmca.native.self_test(["shmdt"])
        else:
            libc().shmdt(libc().shm_attach_private(1 << 20))
        time.sleep(typical * 0.6)
    except KeyboardInterrupt:
        interrupted += 1
    armed[0] = False
    signal.setitimer(signal.ITIMER_REAL, 0)
handle.unregister()
session.finalize()
print(json.dumps({{"pid": os.getpid(), "interrupted": interrupted}}))
"""


def segments_created_by(pid: int) -> list[str]:
    """SysV shared memory segments whose creator was ``pid`` (``ipcs -m -p``)."""
    ipcs = shutil.which("ipcs")
    if ipcs is not None:
        listing = subprocess.run(
            [ipcs, "-m", "-p"], capture_output=True, text=True, check=True
        ).stdout
        # shmid owner cpid lpid
        return [
            line
            for line in listing.splitlines()
            if len(fields := line.split()) >= 4 and fields[0].isdigit() and fields[2] == str(pid)
        ]
    proc = Path("/proc/sysvipc/shm")
    if not proc.exists():
        pytest.skip("neither ipcs nor /proc/sysvipc/shm is available")
    header, *rows = proc.read_text().splitlines()
    column = header.split().index("cpid")
    return [row for row in rows if row.split()[column] == str(pid)]


def test_interrupted_shmdt_probe_leaks_no_segment() -> None:
    seed = random.randrange(2**32)
    result = run_python(CHILD.format(seed=seed, iterations=ITERATIONS), timeout=240)
    assert result.returncode == 0, f"seed {seed}: {result.stderr[-3000:]}"
    report = json.loads(result.stdout.strip().splitlines()[-1])
    assert report["interrupted"] >= ITERATIONS // 4, report  # the probe really was interrupted
    assert segments_created_by(report["pid"]) == [], f"seed {seed}: {report}"
