"""Ctrl-C at random points of init, register, unregister and finalize.

Each child process runs a complete session over every installed framework
a few times to learn how long each phase takes here, then repeatedly arms a
timer that sends it SIGINT somewhere inside one of them. After every
interrupt it does what a program would (unregister what it holds, finalize
what is active) and then checks that pmca and libc agree: no session,
framework or subscription left, libc's prologues byte-exact, a retried
finalize or registration works, and the next complete session delivers
events.

An interrupt raised from inside a call means the call was rolled back (init,
register) or completed (finalize, unregister). One raised just after the
call returned, before its result was stored, is the program's own business:
the call completed, and the program cleans up what it can reach.
"""

from __future__ import annotations

import json
import random
import sys
from pathlib import Path

import pytest

import pmca
from pmca.runtime import RUNTIME
from pmca.testing import run_python

ROOT = Path(__file__).resolve().parents[2]
CHILDREN = 4  # processes, run one after the other
ITERATIONS = 55  # per child: 220 per load mode
PHASES = ("init", "register", "unregister", "finalize")

CHILD = """
import json, os, random, signal, statistics, sys, time, traceback
# SIGINT raises KeyboardInterrupt only if it was not ignored when Python
# started: a test run launched in the background inherits it ignored.
signal.signal(signal.SIGINT, signal.default_int_handler)
sys.path.insert(0, {root!r})
import pmca
from tests.runtime._lifecycle_child import (
    consistency_problems, delivering_cycle, entry_bytes, noop_callback,
)

rng = random.Random({seed})
PMCA_DIR = os.path.dirname(pmca.__file__) + os.sep
baseline = entry_bytes()
records, delivered = delivering_cycle()
assert delivered, "no event before any interrupt"
PHASES = {phases!r}

def run_cycle(callback, marks, phase):
    session = pmca.Session()  # every installed framework
    phase[0] = "init"
    marks.append(time.perf_counter()); session.init()
    phase[0] = "register"
    marks.append(time.perf_counter()); handle = pmca.memory.register_release(callback)
    phase[0] = "unregister"
    marks.append(time.perf_counter()); handle.unregister()
    phase[0] = "finalize"
    marks.append(time.perf_counter()); session.finalize()
    phase[0] = "after"
    marks.append(time.perf_counter())
    return session, handle

# How long each phase takes on this machine, now.
durations = {{name: [] for name in PHASES}}
for _ in range(5):
    marks = []
    run_cycle(noop_callback(), marks, [""])
    for name, start, end in zip(PHASES, marks, marks[1:]):
        durations[name].append(end - start)
typical = {{name: statistics.median(values) for name, values in durations.items()}}

armed = [False]
def on_alarm(signum, frame):
    if armed[0]:
        armed[0] = False
        os.kill(os.getpid(), signal.SIGINT)
signal.signal(signal.SIGALRM, on_alarm)

def quiesce():
    armed[0] = False
    signal.setitimer(signal.ITIMER_REAL, 0)
    for _ in range(3):
        try:
            time.sleep(0.001)
        except KeyboardInterrupt:
            pass  # the alarm fired just as the cycle ended

callback = noop_callback()
hits = {{name: 0 for name in (*PHASES, "after")}}
problems = []
for iteration in range({iterations}):
    target = rng.choice(PHASES)
    delay = rng.uniform(0, typical[target] * 1.2)
    phase = ["start"]
    session = handle = None
    where = []

    def enter(name):
        phase[0] = name
        if name == target:  # the alarm goes off somewhere inside this phase
            armed[0] = True
            signal.setitimer(signal.ITIMER_REAL, max(delay, 1e-6))

    try:
        session = pmca.Session()  # every installed framework
        enter("init")
        session.init()
        enter("register")
        handle = pmca.memory.register_release(callback)
        enter("unregister")
        handle.unregister()
        enter("finalize")
        session.finalize()
        enter("after")
        quiesce()
    except KeyboardInterrupt as exc:
        hits[phase[0]] = hits.get(phase[0], 0) + 1
        interrupted = phase[0]
        # Raised inside the call (more frames than this one), or after it returned.
        frames = traceback.extract_tb(exc.__traceback__)
        inside = any(frame.filename.startswith(PMCA_DIR) for frame in frames)
        where = [f"{{frame.filename.rsplit('/', 1)[-1]}}:{{frame.lineno}}" for frame in frames]
    else:
        interrupted = None
    quiesce()
    found = []
    try:
        # What a program does after Ctrl-C: retry, then clean up what it holds.
        if interrupted == "init" and inside and session.active:
            found.append("init raised KeyboardInterrupt but left the session active")
        if interrupted == "register" and inside and session.active:
            handle = pmca.memory.register_release(callback)  # no "already registered"
        if interrupted == "finalize" and inside:
            session.finalize()  # a retried finalize works
        if handle is not None:
            handle.unregister()
        if session is not None and session.active:
            session.finalize()
        found = consistency_problems(baseline, records)
        records, delivered = delivering_cycle()
        if not delivered:
            found.append("the next session delivered no event")
    except Exception as exc:
        found.append("".join(traceback.format_exception(exc)[-3:]))
    if found:
        problems.append({{
            "iteration": iteration, "interrupted": interrupted, "raised at": where,
            "problems": found,
        }})
        break
print(json.dumps({{"hits": hits, "problems": problems, "typical": typical}}))
"""


def test_random_sigint_leaves_pmca_and_libc_consistent(pmca_load_mode: str) -> None:
    hits: dict[str, int] = {}
    for _ in range(CHILDREN):
        seed = random.randrange(2**32)
        code = CHILD.format(root=str(ROOT), seed=seed, iterations=ITERATIONS, phases=PHASES)
        result = run_python(code, timeout=240)
        assert result.returncode == 0, f"seed {seed}: {result.stderr[-4000:]}"
        report = json.loads(result.stdout.strip().splitlines()[-1])
        assert report["problems"] == [], f"seed {seed} ({pmca_load_mode}): {report}"
        for phase, count in report["hits"].items():
            hits[phase] = hits.get(phase, 0) + count
    # The interrupts really landed inside the transitions, not only around them.
    print(f"interrupts by phase ({pmca_load_mode}): {hits}")
    assert sum(hits[phase] for phase in PHASES) >= CHILDREN * ITERATIONS // 2, hits
    assert all(hits[phase] >= 5 for phase in ("init", "register", "finalize")), hits


RAISING_COMPONENT = """
import pmca
import {events} as events

class TestComponent(pmca.Component):
    framework = {framework!r}
    name = {name!r}
    version = "1.0.0"
    api_version = "1.0.0"

    @pmca.hookimpl
    def open(self, ctx):
        if {hook!r} == "open":
            raise {error}

    @pmca.hookimpl
    def query(self, ctx):
        return pmca.Query(priority=1, module=object())

    @pmca.hookimpl
    def close(self, ctx):
        events.CLOSED.append({name!r})
        if {hook!r} == "close":
            raise {error}
"""


def _libc_unpatched() -> bool:
    from tests.runtime._lifecycle_child import entry_bytes

    return entry_bytes() == BASELINE_ENTRIES


@pytest.fixture
def raising_framework(install_plugin, unique, request: pytest.FixtureRequest) -> str:  # type: ignore[no-untyped-def]
    from tests.conftest import framework_source

    hook, error = request.param
    framework = unique("hostile")
    events = f"{framework}_events"
    install_plugin(
        f"dist-{framework}",
        entry_points={
            "pmca.frameworks": {framework: f"{framework}_decl:FRAMEWORK"},
            # "zbad" after "agood": closed first, in reverse order of opening.
            f"pmca.{framework}": {
                "agood": f"{framework}_good:TestComponent",
                "zbad": f"{framework}_bad:TestComponent",
            },
        },
        modules={
            f"{framework}_decl": framework_source(framework, policy="multi"),
            f"{framework}_events": "CLOSED = []\n",
            f"{framework}_bad": RAISING_COMPONENT.format(
                framework=framework, name="zbad", hook=hook, error=error, events=events
            ),
            f"{framework}_good": RAISING_COMPONENT.format(
                framework=framework, name="agood", hook="none", error="None", events=events
            ),
        },
    )
    return framework


BASELINE_ENTRIES: dict[str, bytes] = {}


@pytest.mark.parametrize(
    "raising_framework",
    [("close", "KeyboardInterrupt"), ("close", "SystemExit(4)")],
    indirect=True,
    ids=["KeyboardInterrupt", "SystemExit"],
)
def test_a_component_close_raising_a_base_exception_still_closes_everything(
    raising_framework: str,
) -> None:
    from tests.runtime._lifecycle_child import entry_bytes

    BASELINE_ENTRIES.update(entry_bytes())
    session = pmca.Session(frameworks=["memory", raising_framework]).init()
    handle = pmca.memory.register_release(lambda *event: None)
    assert not _libc_unpatched()
    assert len(session.components(raising_framework)) == 2
    with pytest.raises((KeyboardInterrupt, SystemExit)):
        session.finalize()
    assert not session.active and not handle.active
    assert sys.modules[f"{raising_framework}_events"].CLOSED == ["zbad", "agood"]
    assert RUNTIME.sessions == 0 and not RUNTIME.frameworks
    assert _libc_unpatched()
    assert [name for kind, name in RUNTIME.history if kind == "close"] == [
        raising_framework,
        "memory",
        "patcher",
    ]
    session.finalize()  # a retry after the interrupt is harmless
    with pmca.Session(frameworks=["memory"]):  # and the next session starts clean
        pmca.memory.register_release(lambda *event: None).unregister()


@pytest.mark.parametrize(
    "raising_framework",
    [("open", "KeyboardInterrupt"), ("open", "SystemExit(4)")],
    indirect=True,
    ids=["KeyboardInterrupt", "SystemExit"],
)
def test_a_component_open_raising_a_base_exception_rolls_the_init_back(
    raising_framework: str,
) -> None:
    from tests.runtime._lifecycle_child import entry_bytes

    BASELINE_ENTRIES.update(entry_bytes())
    session = pmca.Session(mca={"mpi_leave_pinned": 1}, frameworks=["memory", raising_framework])
    with pytest.raises((KeyboardInterrupt, SystemExit)):
        session.init()
    assert not session.active
    assert RUNTIME.sessions == 0 and not RUNTIME.frameworks and not RUNTIME.live
    assert _libc_unpatched()  # memory had installed its hooks at open (leave_pinned=1)
    assert ("open", "patcher") in RUNTIME.history


STUCK_COMPONENT = """
import time
import pmca
import {framework}_flag as flag

class TestComponent(pmca.Component):
    framework = {framework!r}
    name = "stuck"
    version = "1.0.0"
    api_version = "1.0.0"

    @pmca.hookimpl
    def open(self, ctx):
        flag.REACHED.set()
        time.sleep(120)  # a hook that does not come back
"""

SECOND_CTRL_C = """
import os, signal, sys, threading, time
# SIGINT raises KeyboardInterrupt only if it was not ignored when Python
# started: a test run launched in the background inherits it ignored.
signal.signal(signal.SIGINT, signal.default_int_handler)
sys.path.insert(0, {root!r})
import pmca
from pmca.runtime import RUNTIME
from tests.runtime._lifecycle_child import consistency_problems, delivering_cycle, entry_bytes

baseline = entry_bytes()
records, _ = delivering_cycle()
import {framework}_flag as flag

def press_ctrl_c_twice():
    flag.REACHED.wait()
    print("patched while stuck:", entry_bytes() != baseline, flush=True)
    for _ in range(2):
        # Only once the hook sleeps: CPython does not look for a signal that
        # arrives just before a blocking call. And at the main thread, since
        # a signal taken by another thread does not wake the main's sleep.
        time.sleep(0.3)
        signal.pthread_kill(threading.main_thread().ident, signal.SIGINT)

threading.Thread(target=press_ctrl_c_twice, daemon=True).start()
session = pmca.Session(mca={{"mpi_leave_pinned": 1}}, frameworks=[{framework!r}])
start = time.monotonic()
try:
    session.init()
except KeyboardInterrupt:
    print(f"interrupted after {{time.monotonic() - start:.1f}} s")
problems = consistency_problems(baseline, records)
if session.active:
    problems.append("the abandoned init left its session active")
print("problems:", problems)
print("delivers:", delivering_cycle()[1])
"""


def test_a_second_ctrl_c_abandons_a_stuck_init_and_rolls_it_back(
    tmp_path: Path,
    unique,  # type: ignore[no-untyped-def]
) -> None:
    from pmca.testing import make_distribution
    from tests.conftest import framework_source

    framework = unique("stuckfw")
    make_distribution(
        tmp_path,
        f"dist-{framework}",
        entry_points={
            "pmca.frameworks": {framework: f"{framework}_decl:FRAMEWORK"},
            f"pmca.{framework}": {"stuck": f"{framework}_stuck:TestComponent"},
        },
        modules={
            f"{framework}_decl": framework_source(framework, depends=("memory",)),
            f"{framework}_stuck": STUCK_COMPONENT.format(framework=framework),
            f"{framework}_flag": "import threading\nREACHED = threading.Event()\n",
        },
    )
    result = run_python(
        SECOND_CTRL_C.format(root=str(ROOT), framework=framework),
        env={"PYTHONPATH": str(tmp_path)},
        timeout=100,  # the hook sleeps 120 s: only the second Ctrl-C ends it in time
    )
    assert result.returncode == 0, result.stderr[-3000:]
    assert "patched while stuck: True" in result.stdout, result.stdout
    assert "interrupted after" in result.stdout, result.stdout
    assert "problems: []" in result.stdout, result.stdout
    assert "delivers: True" in result.stdout, result.stdout
