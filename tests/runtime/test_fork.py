"""fork() from one thread while another is in the middle of sessions.

The runtime lock is taken before every fork, so a child never inherits a
transition half-done by a thread it does not have; every other pmca lock
is fresh in the child. Each child then runs a complete session of its own.
"""

from __future__ import annotations

import json
import random
from pathlib import Path

from pmca.testing import run_python

ROOT = Path(__file__).resolve().parents[2]
FORKS = 60

CHILD = """
import json, os, random, signal, sys, threading, time
sys.path.insert(0, {root!r})
import pmca
from tests.runtime._lifecycle_child import FRAMEWORKS, delivering_cycle, noop_callback

rng = random.Random({seed})
stop = threading.Event()
cycles = [0]

def churn():
    # Sessions opening and closing (hooks installed, restored) all the time.
    while not stop.is_set():
        with pmca.Session(frameworks=FRAMEWORKS):
            pmca.memory.register_release(noop_callback()).unregister()
        cycles[0] += 1

def in_child():
    code = 3
    try:
        records, delivered = delivering_cycle()
        code = 0 if delivered else 2
    except BaseException as exc:
        print(f"child {{os.getpid()}}: {{exc!r}}", file=sys.stderr, flush=True)
    os._exit(code)

outcomes = []
def forker():
    for _ in range({forks}):
        time.sleep(rng.uniform(0, 0.01))
        pid = os.fork()
        if pid == 0:
            in_child()
        deadline = time.monotonic() + 20
        while True:
            done, status = os.waitpid(pid, os.WNOHANG)
            if done:
                outcomes.append(os.waitstatus_to_exitcode(status))
                break
            if time.monotonic() > deadline:
                os.kill(pid, signal.SIGKILL)
                os.waitpid(pid, 0)
                outcomes.append("hung")
                return  # one deadlock is enough to know
            time.sleep(0.002)

churner = threading.Thread(target=churn, daemon=True)
churner.start()
while cycles[0] < 2:
    time.sleep(0.01)
thread = threading.Thread(target=forker)
thread.start()
thread.join()
stop.set()
churner.join()
print(json.dumps({{"outcomes": outcomes, "cycles": cycles[0]}}))
"""


def test_fork_from_a_thread_while_another_churns_sessions(pmca_load_mode: str) -> None:
    seed = random.randrange(2**32)
    result = run_python(CHILD.format(root=str(ROOT), seed=seed, forks=FORKS), timeout=300)
    assert result.returncode == 0, f"seed {seed}: {result.stderr[-4000:]}"
    report = json.loads(result.stdout.strip().splitlines()[-1])
    assert report["outcomes"] == [0] * FORKS, f"seed {seed}: {report}\n{result.stderr[-4000:]}"


STUCK = """
import os, sys, threading, time
import pmca
from pmca.runtime import RUNTIME, _runtime

_runtime.TRANSITION_WAIT = 0.2
inside = threading.Event()
release = threading.Event()

def stuck_transition():
    with RUNTIME.lock:  # a transition that will not end while we fork
        inside.set()
        release.wait()

thread = threading.Thread(target=stuck_transition)
thread.start()
inside.wait()
pid = os.fork()
if pid == 0:
    try:
        pmca.Session(frameworks=["memory"]).init()
    except pmca.SessionError as exc:
        print(f"child: {exc}", flush=True)
        os._exit(0)
    os._exit(1)
_, status = os.waitpid(pid, 0)
release.set()
thread.join()
with pmca.Session(frameworks=["memory"]):  # the parent is unaffected
    pass
print("exit", os.waitstatus_to_exitcode(status))
"""


def test_child_of_a_fork_during_a_stuck_transition_refuses_sessions_clearly() -> None:
    result = run_python(STUCK, timeout=120)
    assert result.returncode == 0, result.stderr[-4000:]
    assert "exit 0" in result.stdout, result.stdout + result.stderr
    assert "was forked while another thread was in a pmca session init/finalize" in (result.stdout)


HELD_LOCKS = """
import os, sys, threading
sys.path.insert(0, {root!r})
import pmca
from pmca import _libc
from pmca.mca import _loader, _open
from pmca.runtime import RUNTIME
from tests.runtime._lifecycle_child import delivering_cycle

session = pmca.Session(frameworks=["memory"]).init()
handle = pmca.memory.register_release(lambda *event: None)
locks = {{
    "parameter space": RUNTIME.params._lock,
    "session cleanups": session.domain._lock,
    "memory/patcher install": session.module("memory")._install_lock,
    "patcher/overwrite table": pmca.patcher.current()._lock,
    "forced-static table": _open._forced_static_lock,
    "resident libraries": _loader._resident_lock,
    "address quarantine": _loader._QUARANTINE._lock,
    "libc handle": _libc._lock,
}}
release = threading.Event()

def hold(lock, ready):
    with lock:
        ready.set()
        release.wait()

for lock in locks.values():  # each held by a thread that the child will not have
    ready = threading.Event()
    threading.Thread(target=hold, args=(lock, ready), daemon=True).start()
    ready.wait()
pid = os.fork()
if pid == 0:
    stuck = [name for name, lock in locks.items() if not lock.acquire(timeout=5)]
    for name, lock in locks.items():
        if name not in stuck:
            lock.release()
    print("stuck in child:", stuck, flush=True)
    if stuck:
        os._exit(1)  # pmca would deadlock on them
    handle.unregister()
    session.finalize()  # the child's copy of the session, finalized in the child
    print("child delivers:", delivering_cycle()[1], flush=True)
    os._exit(0)
_, status = os.waitpid(pid, 0)
release.set()
handle.unregister()
session.finalize()
print("child exit:", os.waitstatus_to_exitcode(status))
"""


def test_locks_held_by_other_threads_at_fork_are_free_in_the_child(pmca_load_mode: str) -> None:
    result = run_python(HELD_LOCKS.format(root=str(ROOT)), timeout=120)
    assert result.returncode == 0, result.stderr[-3000:]
    assert "stuck in child: []" in result.stdout, result.stdout
    assert "child delivers: True" in result.stdout, result.stdout
    assert "child exit: 0" in result.stdout, result.stdout + result.stderr[-3000:]
