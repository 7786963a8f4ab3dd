"""Seed scenario 2: the madvise self-deadlock (ompi#13149, libfabric#10879), on a model.

libfabric 2.5.1's MR cache inserts into its tree with ``mm_lock`` held and
the insert may ``malloc`` a tree node; under mimalloc, ``malloc`` can give
memory back with ``madvise``; Open MPI's patched ``madvise`` calls the
release callbacks right there, and libfabric's callback takes ``mm_lock``:
the thread waits for a mutex it holds itself.  libfabric's fix (d27cfffdc,
2.6.0) allocates the node before taking the lock.

The reproduction runs a **model** of that path, not the libraries: libfabric
2.5.1 reaches its MR cache only from hardware providers (verbs, efa, cxi,
opx, lpp) and, in shm/sm2, for GPU IPC handles, and does not export the
cache's functions; ``pmca_madvise_deadlock.real_cache`` reads that from the
installed library and ``fi_getinfo`` (the row says it).  The model lives in
its own distribution, ``pmca-madvise-deadlock`` (``plugins/``): Open MPI's
patched hooks with synchronous native callbacks and a cache that keeps
2.5.1's locking (``mm_lock``, a node ``malloc``ed under it), run by a native
multi-threaded workload under the real mimalloc (``cmeel-mimalloc``,
preloaded, purging eagerly; every child checks that ``malloc`` is
mimalloc's).  A watchdog outside the process decides what a hang is from the
stuck process's native state: the thread sleeping in ``futex`` on
``mm_lock`` is the thread glibc records as ``mm_lock``'s owner
(``/proc/<pid>/task/*/syscall`` and the mutex read from ``/proc/<pid>/mem``;
gdb's backtrace too, when gdb is installed).  The prevention runs the same
model cache and workload with pmca's hooks as the cache's memory monitor:
they only publish to a lock-free ring, and a native thread drains it into
the cache's notify, outside any allocator.

Needs: x86_64 Linux with glibc, the native backend, and the
``pmca-madvise-deadlock`` distribution (which brings ``cmeel-mimalloc``).
"""

from __future__ import annotations

import importlib.util
import platform
import re
from typing import Any

from ._common import skipped_without_native
from ._result import ScenarioResult

SCENARIO = "madvise-deadlock"
REPRODUCTION_DISTRIBUTION = "pmca-madvise-deadlock"
_REPRODUCTION = "model of Open MPI 5 hooks + libfabric 2.5.1 MR cache, mimalloc"
_PREVENTION = "the same model cache, pmca's hooks as its monitor, mimalloc"


def unavailable_reason() -> str | None:
    """Why the scenario cannot run here, or None."""
    if platform.machine() != "x86_64":
        return (
            f"the reproduction patches libc like Open MPI on x86_64; this is {platform.machine()}"
        )
    if importlib.util.find_spec("pmca_madvise_deadlock") is None:
        return (
            f"the {REPRODUCTION_DISTRIBUTION} distribution is not installed "
            "(pip install plugins/pmca-madvise-deadlock)"
        )
    if _plugin().mimalloc_path() is None:
        return "libmimalloc.so not found (pip install cmeel-mimalloc)"
    return None


def why_a_model() -> str:
    """Why the reproduction cannot drive libfabric's own cache here (read from the library)."""
    facts = importlib.import_module("pmca_madvise_deadlock.real_cache").facts()
    return str(facts.get("unavailable") or f"libfabric offers its MR cache here: {facts}")


def _plugin() -> Any:
    """The reproduction distribution's package (a separate, optional distribution)."""
    return importlib.import_module("pmca_madvise_deadlock")


def _frames(backtrace: str | None) -> list[str]:
    """Function names of a gdb backtrace, innermost first."""
    if not backtrace:
        return []
    return re.findall(r"^#\d+\s+(?:0x[0-9a-f]+ in )?([\w.@]+) \(", backtrace, re.MULTILINE)


def describe_hang(result: dict[str, Any]) -> str:
    """One line: which thread waits on which lock, and who owns it."""
    owner = result.get("owner")
    lock = result.get("mm_lock")
    where = f"mm_lock at {lock:#x}" if isinstance(lock, int) else "mm_lock"
    text = (
        f"thread {owner} sleeps in futex on {where}, whose owner is thread {owner} itself "
        "(/proc/<pid>/task/*/syscall, mutex owner from /proc/<pid>/mem)"
    )
    frames = _frames(result.get("backtrace"))
    if frames:
        text += "; gdb: " + " <- ".join(frames[:12])
    return text


def run_design(
    design: str, *, runs: int, seconds: float, stop_at_first: bool = False
) -> list[dict[str, Any]]:
    """``runs`` children of one design under the watchdog (each in its own process)."""
    run_once = importlib.import_module("pmca_madvise_deadlock.watchdog").run_once
    from ._common import _child_environment

    # As every scenario child: the load mode, but none of the user's PMCA_MCA_* settings.
    env = _child_environment(None, inherit_mca=False)
    results: list[dict[str, Any]] = []
    for _ in range(runs):
        with_gdb = not any(r.get("self_deadlock") for r in results)
        results.append(
            run_once(design, seconds, grace=max(5.0, seconds), with_gdb=with_gdb, env=env)
        )
        if stop_at_first and results[-1].get("self_deadlock"):
            break
    return results


#: Runs the reproduction may take to hit the race before it counts as not
#: reproducing (it stops at the first self-deadlock).  Measured: most runs of
#: 10 s hang, so missing in all of them means the reproduction broke, not bad luck.
REPRODUCTION_ATTEMPTS = 8
#: Seconds of each reproduction run.
REPRODUCTION_SECONDS = 10.0


def _reproduction(attempts: int, seconds: float) -> ScenarioResult:
    results = run_design("ompi", runs=attempts, seconds=seconds, stop_at_first=True)
    deadlocked = [r for r in results if r.get("self_deadlock")]
    failed = [r for r in results if r["outcome"] == "failed"]
    if deadlocked:
        first = next((r for r in deadlocked if r.get("backtrace")), deadlocked[0])
        return ScenarioResult(
            SCENARIO,
            _REPRODUCTION,
            "reproduced",
            f"self-deadlock in run {results.index(deadlocked[0]) + 1} of at most {attempts} "
            f"({seconds:g} s each, {first.get('allocator', '?')}): "
            + describe_hang(first)
            + f"; a model: {why_a_model()}",
        )
    if failed:
        return ScenarioResult(SCENARIO, _REPRODUCTION, "failed", f"child failed: {failed[0]}")
    hung = [r for r in results if r["outcome"] == "hung"]
    if hung:
        return ScenarioResult(
            SCENARIO,
            _REPRODUCTION,
            "failed",
            f"{len(hung)} of {len(results)} runs hung without the self-deadlock signature",
        )
    # The reproduction is meant to reproduce: a miss over the whole budget is a
    # failure (it stopped reproducing), reported with its counts, never a skip.
    return ScenarioResult(
        SCENARIO,
        _REPRODUCTION,
        "failed",
        f"did not reproduce: 0 self-deadlocks in {len(results)} runs of {seconds:g} s, all "
        "completed (benchmarks/bench_madvise_deadlock.py measures the rate)",
    )


def _prevention(runs: int, seconds: float) -> ScenarioResult:
    results = run_design("pmca", runs=runs, seconds=seconds)
    completed = [r for r in results if r["outcome"] == "completed"]
    if completed and not all(r.get("coherent") for r in completed):
        return ScenarioResult(
            SCENARIO, _PREVENTION, "failed", "completed, but without pmca's memory hooks"
        )
    if len(completed) == len(results):
        phases = sum(int(r["phases"]) for r in completed)
        return ScenarioResult(
            SCENARIO,
            _PREVENTION,
            "prevented",
            f"{len(results)} of {len(results)} runs of the same workload on the same model "
            f"cache completed ({phases} cache lifetimes, {seconds:g} s each; "
            f"{sum(int(r.get('monitor_events', 0)) for r in completed)} release events "
            "delivered to the cache by pmca's hooks)",
        )
    bad = next(r for r in results if r["outcome"] != "completed")
    detail = describe_hang(bad) if bad.get("self_deadlock") else str(bad)
    return ScenarioResult(SCENARIO, _PREVENTION, "failed", f"{bad['outcome']}: {detail}")


def run(
    *,
    runs: int = 3,
    seconds: float = 5.0,
    reproduce: bool = True,
    timeout: float | None = None,
    attempts: int = REPRODUCTION_ATTEMPTS,
) -> list[ScenarioResult]:
    """The reproduction (until its first self-deadlock, at most ``attempts`` runs of
    :data:`REPRODUCTION_SECONDS`) and pmca's design (``runs`` of ``seconds``).

    Each run is a child process with a hard limit of ``2 * seconds`` (at
    least ``seconds + 5``); ``reproduce=False`` skips the reproduction.  A
    reproduction that does not hit in its budget is ``failed``.
    ``timeout``, if given, replaces ``seconds`` (the older signature).
    """
    if timeout is not None:
        seconds = timeout
    skipped = skipped_without_native(SCENARIO, unavailable_reason)
    if skipped is not None:
        return skipped
    first = (
        _reproduction(attempts, max(seconds, REPRODUCTION_SECONDS))
        if reproduce
        else ScenarioResult(SCENARIO, _REPRODUCTION, "skipped", "not run (quick)")
    )
    return [first, _prevention(runs, seconds)]
