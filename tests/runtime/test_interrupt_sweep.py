"""Ctrl-C at every point of init and finalize, one point after the other.

The random storm (test_interrupts.py) lands where timing puts it; this walks
the interrupt point through the whole transition instead. A child process
counts the points pmca passes during one ``Session().init()`` over every
installed framework, and during its ``finalize()``, then repeats the cycle
with the interrupt at the N-th point of one of them, for N strided over the
whole count plus a random sample. Two kinds of interrupt:

- ``signal``: a real SIGINT at the N-th Python line pmca runs. It is the
  first Ctrl-C: inside a transition pmca holds it back, and raises it once
  the transition is over.
- ``abrupt``: ``KeyboardInterrupt`` raised at the N-th entry into a pmca
  function, where CPython runs a signal handler that raises: a second
  Ctrl-C, which pmca does not hold back, lands there.

After each interrupt the child does what a program would (finalize what is
active, retry an interrupted finalize) and checks that nothing is left: no
session, framework, parameter space or subscription, libc's prologues idle
and byte-exact; the next cycle's init must work. The first point that goes
wrong is reported with where the interrupt was raised.
"""

from __future__ import annotations

import json
import random
from pathlib import Path

import pytest

from pmca.testing import run_python

ROOT = Path(__file__).resolve().parents[2]
#: Points walked per phase, kind of interrupt and load mode: strided, then random ones.
STRIDED = 80
RANDOM = 20

CHILD = """
import json, os, random, signal, sys, traceback
# SIGINT raises KeyboardInterrupt only if it was not ignored when Python
# started: a test run launched in the background inherits it ignored.
signal.signal(signal.SIGINT, signal.default_int_handler)
sys.path.insert(0, {root!r})
import pmca
from pmca.native import backend
from pmca.runtime import RUNTIME
from tests.runtime._lifecycle_child import (
    SYMBOLS, consistency_problems, delivering_cycle, entry_bytes,
)

PMCA_DIR = os.path.dirname(pmca.__file__) + os.sep
baseline = entry_bytes()
records, delivered = delivering_cycle()
assert delivered, "no event before any interrupt"

points_passed = [0]
target = [0]

def at_point():
    points_passed[0] += 1
    return points_passed[0] == target[0]

def line_counter(frame, event, arg):
    if event == "line" and at_point():
        signal.raise_signal(signal.SIGINT)  # the handler in force decides
    return line_counter

def signal_tracer(frame, event, arg):
    return line_counter if frame.f_code.co_filename.startswith(PMCA_DIR) else None

def abrupt_tracer(frame, event, arg):
    if event == "call" and frame.f_code.co_filename.startswith(PMCA_DIR) and at_point():
        raise KeyboardInterrupt
    return None

tracer = {{"signal": signal_tracer, "abrupt": abrupt_tracer}}[{kind!r}]

def traced(call, swept):
    if swept:
        sys.settrace(tracer)
    try:
        return call()
    finally:
        sys.settrace(None)

def cycle(swept):  # init and finalize a session, counting the points of phase swept
    session = pmca.Session()
    phase = "init"
    try:
        traced(session.init, swept == "init")
        phase = "finalize"
        traced(session.finalize, swept == "finalize")
    except KeyboardInterrupt as exc:
        return session, phase, exc
    return session, None, None

# Warm up (static mode imports on the first open), then count each phase.
cycle(None)
rng = random.Random({seed})
points = []
for swept in ("init", "finalize"):
    target[0], points_passed[0] = 0, 0
    cycle(swept)
    total = points_passed[0]
    strided = sorted({{1 + (total * k) // {strided} for k in range({strided})}})
    sampled = sorted(rng.randrange(1, total) for _ in range({random_points}))
    points += [(swept, point, total) for point in strided + sampled]
hits = {{"init": 0, "finalize": 0, "none": 0}}
problems = []
for swept, point, total in points:
    target[0], points_passed[0] = point, 0
    found, where = [], []
    try:
        session, phase, exc = cycle(swept)
    except Exception as error:
        session, phase, exc = None, "crash", None
        found.append("cycle raised " + "".join(traceback.format_exception(error)[-3:]))
    hits[phase or "none"] = hits.get(phase or "none", 0) + 1
    if exc is not None:
        where = [
            f"{{frame.filename.rsplit('/', 1)[-1]}}:{{frame.lineno}}"
            for frame in traceback.extract_tb(exc.__traceback__)
        ][-6:]
    try:
        if phase == "init" and session.active:
            found.append("init raised KeyboardInterrupt but left the session active")
        if phase == "finalize":
            session.finalize()  # a retried finalize is harmless
        if session is not None and session.active:
            session.finalize()
        found += consistency_problems(baseline, records)
        if RUNTIME._space is not None:
            found.append("the parameter space outlived the last session")
        found += [
            f"{{symbol}} is {{backend().state(symbol)}} with no session active"
            for symbol in SYMBOLS
            if backend().state(symbol) != "idle"
        ]
    except Exception as error:
        found.append("cleanup raised " + "".join(traceback.format_exception(error)[-3:]))
    if found:
        problems.append({{
            "point": point, "of": total, "swept": swept, "phase": phase, "raised at": where,
            "problems": found,
        }})
        break
if not problems:
    records, delivered = delivering_cycle()
    if not delivered:
        problems.append({{"point": None, "problems": ["the last session delivered no event"]}})
print(json.dumps({{"hits": hits, "problems": problems}}))
"""


@pytest.mark.parametrize("kind", ["signal", "abrupt"])
def test_an_interrupt_anywhere_in_init_or_finalize_leaves_pmca_consistent(
    kind: str, pmca_load_mode: str
) -> None:
    seed = random.randrange(2**32)
    code = CHILD.format(root=str(ROOT), seed=seed, strided=STRIDED, random_points=RANDOM, kind=kind)
    result = run_python(code, timeout=240)
    assert result.returncode == 0, f"seed {seed}: {result.stderr[-4000:]}"
    report = json.loads(result.stdout.strip().splitlines()[-1])
    assert report["problems"] == [], f"{kind}, seed {seed} ({pmca_load_mode}): {report}"
    # The points really fell inside both transitions.
    print(f"{kind} interrupts by phase ({pmca_load_mode}): {report['hits']}")
    assert report["hits"]["init"] >= STRIDED // 2, report["hits"]
    assert report["hits"]["finalize"] >= STRIDED // 2, report["hits"]
