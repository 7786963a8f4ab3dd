"""Release delivery through sessions: finalize, epochs across sessions, self-test under load,
the ring size parameter and batched callbacks.  Each scenario runs in a fresh interpreter."""

from __future__ import annotations

import pytest

from pmca.testing import run_python

PRELUDE = """
import ctypes, os, sys, threading, time
import pmca
import pmca.native as native
from pmca._libc import libc, PAGE
c = libc()
"""


def _run(code: str, timeout: float = 120, env: dict[str, str] | None = None) -> str:
    result = run_python(PRELUDE + code, timeout=timeout, env=env)
    assert result.returncode == 0, result.stdout + result.stderr
    return result.stdout


def test_finalize_delivers_the_events_still_pending() -> None:
    out = _run(
        """
lost_runs = 0
for run in range(20):
    seen = set()
    with pmca.Session(frameworks=["memory"]):
        pmca.memory.register_release(lambda a, l, k, f: seen.add(a) if k == "munmap" else None)
        released = []
        for _ in range(100):
            region = c.map_anonymous(PAGE)
            c.munmap(region, PAGE)
            released.append(region)
        # no drain(): finalize must deliver them
    lost_runs += any(r not in seen for r in released)
print("lost runs", lost_runs)
"""
    )
    assert "lost runs 0" in out


def test_a_session_never_sees_what_an_earlier_session_released() -> None:
    out = _run(
        """
with pmca.Session(frameworks=["memory"]):        # keeps the hooks in across the inner sessions
    keeper = pmca.memory.register_release(lambda *e: None)
    first = []
    with pmca.Session(frameworks=["memory"]):
        pmca.memory.register_release(lambda a, l, k, f: first.append(a))
        during = c.map_anonymous(4 * PAGE)
        c.munmap(during, 4 * PAGE)
    between = c.map_anonymous(16 * PAGE)
    c.munmap(between, 16 * PAGE)                # released with no session of the second kind open
    second = []
    with pmca.Session(frameworks=["memory"]):
        pmca.memory.register_release(lambda a, l, k, f: second.append((a, l)))
        pmca.memory.drain()
        stale = [e for e in second if e[0] in (during, between)]
        after = c.map_anonymous(8 * PAGE)
        c.munmap(after, 8 * PAGE)
        pmca.memory.drain()
    keeper.unregister()
assert during in first
assert not stale, stale
assert (after, 8 * PAGE) in second
print("sessions ok")
"""
    )
    assert "sessions ok" in out


def test_the_self_test_passes_under_a_release_storm() -> None:
    # A small ring, so that other threads overflow it while the self-test
    # probes: its probes must be retried, not reported as missing.
    out = _run(
        """
from pmca.native._abi import probe_library_path
probe = ctypes.CDLL(str(probe_library_path()))
probe.pmca_probe_release_threads.argtypes = [ctypes.c_int, ctypes.c_size_t, ctypes.c_uint,
                                             ctypes.POINTER(ctypes.c_uint64)]
done = threading.Event()
def storm():
    results = (ctypes.c_uint64 * 3)()
    while not done.is_set():
        probe.pmca_probe_release_threads(4, PAGE, 200, results)
stormer = threading.Thread(target=storm)
stormer.start()
failures = []
try:
    for session in range(30):
        with pmca.Session(frameworks=["memory"]):
            try:
                pmca.memory.register_release(lambda *e: None)
            except pmca.memory.MemoryHooksUnavailable as exc:
                failures.append(str(exc))
finally:
    done.set()
    stormer.join()
print("dropped", native.stats().dropped, "failures", len(failures), failures[:1])
""",
        timeout=300,
        env={"PMCA_MCA_memory_patcher_ring_size": "1024"},
    )
    assert "failures 0" in out, out


def test_the_ring_size_parameter_sets_the_ring_once() -> None:
    out = _run(
        """
with pmca.Session(frameworks=["memory"]):
    h = pmca.memory.register_release(lambda *e: None)
    print("capacity", native.backend().capacity)
    h.unregister()
""",
        env={"PMCA_MCA_memory_patcher_ring_size": "4096"},
    )
    assert "capacity 4096" in out


def test_a_ring_size_asked_for_after_the_ring_exists_is_said_not_applied() -> None:
    # The ring is allocated once per process: a later session asking another
    # size gets the one in place, and a warning naming the parameter; asking
    # the size in place is no news.
    result = run_python(
        PRELUDE
        + """
for size in (4096, 4096, 8192):
    with pmca.Session(frameworks=["memory"], mca={"memory_patcher_ring_size": size}):
        h = pmca.memory.register_release(lambda *e: None)
        h.unregister()
print("capacity", native.backend().capacity)
""",
        env={"PMCA_MCA_memory_base_verbose": "warn"},
    )
    assert "capacity 4096" in result.stdout, result.stdout + result.stderr
    said = [line for line in result.stderr.splitlines() if "already allocated" in line]
    assert len(said) == 1 and "memory_patcher_ring_size" in said[0], result.stderr
    assert "wanted=8192" in said[0] and "actual=4096" in said[0], said


@pytest.mark.parametrize("value", ["1000", "512", "134217728"])
def test_a_bad_ring_size_is_rejected_naming_the_parameter(value: str) -> None:
    result = run_python(
        PRELUDE
        + """
try:
    with pmca.Session(frameworks=["memory"]):
        pmca.memory.register_release(lambda *e: None)
except Exception as exc:
    print("error:", exc)
else:
    print("accepted", native.backend().capacity)
""",
        env={"PMCA_MCA_memory_patcher_ring_size": value},
    )
    output = result.stdout + result.stderr
    assert "memory_patcher_ring_size" in output and value in output, output
    assert "power of two" in output, output


def test_batched_release_callbacks_through_the_memory_api() -> None:
    out = _run(
        """
got = []
with pmca.Session(frameworks=["memory"]):
    h = pmca.memory.register_release(lambda batch: got.extend(batch), batch=True)
    region = c.map_anonymous(3 * PAGE)
    c.munmap(region, 3 * PAGE)
    pmca.memory.drain()
    h.unregister()
assert (region, 3 * PAGE, "munmap", True) in got, got[:5]
print("batch ok", pmca.native.stats().delivered > 0)
"""
    )
    assert "batch ok True" in out


def test_four_threads_each_running_sessions_and_draining_never_hang() -> None:
    out = _run(
        """
errors = []
def worker(n):
    try:
        for _ in range(8):
            seen = set()
            with pmca.Session(frameworks=["memory"]):
                pmca.memory.register_release(lambda a, l, k, f: seen.add(a))
                released = []
                for _ in range(50):
                    region = c.map_anonymous(PAGE)
                    c.munmap(region, PAGE)
                    released.append(region)
                pmca.memory.drain()
                missing = [r for r in released if r not in seen]
                if missing:
                    errors.append((n, len(missing)))
    except BaseException as exc:
        errors.append((n, repr(exc)))
threads = [threading.Thread(target=worker, args=(n,)) for n in range(4)]
for t in threads:
    t.start()
for t in threads:
    t.join(200)
    assert not t.is_alive(), "a thread hung in a session or a drain"
assert not errors, errors
print("threads ok")
""",
        timeout=240,
    )
    assert "threads ok" in out
