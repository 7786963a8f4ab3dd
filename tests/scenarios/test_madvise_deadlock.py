"""Seed scenario 2: the madvise self-deadlock under real mimalloc; pmca runs the same workload.

Each run is a child process with a hard time limit; a hung child is judged
from its native state (the thread asleep on ``mm_lock`` owns ``mm_lock``).
The reproduction is a race: ``benchmarks/bench_madvise_deadlock.py``
measures its rate over 30 runs of 10 s.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from pmca.scenarios import madvise_deadlock
from tests._matrix import once_per_matrix

pytestmark = [
    pytest.mark.usefixtures("native_backend"),
    pytest.mark.skipif(
        madvise_deadlock.unavailable_reason() is not None,
        reason=str(madvise_deadlock.unavailable_reason()),
    ),
]

SECONDS = 10.0


def test_pmca_runs_the_same_workload_to_completion() -> None:
    results = madvise_deadlock.run_design("pmca", runs=2, seconds=SECONDS / 2)
    assert [r["outcome"] for r in results] == ["completed", "completed"], results
    assert all(r["coherent"] and r["phases"] > 0 for r in results), results
    # The same model cache heard pmca's hooks: release events reached its notify.
    assert all(r["monitor_events"] > 0 for r in results), results


def test_why_the_reproduction_is_a_model_is_read_from_libfabric() -> None:
    real_cache = pytest.importorskip("pmca_madvise_deadlock.real_cache")
    facts = real_cache.facts()
    if not facts["probed"]:
        pytest.skip(facts["unavailable"])
    if facts["cache_providers"] or facts["exported"]:
        pytest.skip(f"libfabric offers its MR cache here: {facts}")
    assert facts["providers"], facts
    for provider in facts["providers"]:
        assert provider in facts["unavailable"], facts
    assert "verbs, efa, cxi, opx, lpp" in madvise_deadlock.why_a_model()


# Open MPI's design over real mimalloc: neither pmca's load mode nor the interpreter is in it.
@once_per_matrix()
def test_the_reproduction_hangs_only_in_its_own_lock() -> None:
    results = madvise_deadlock.run_design(
        "ompi", runs=madvise_deadlock.REPRODUCTION_ATTEMPTS, seconds=SECONDS, stop_at_first=True
    )
    assert not [r for r in results if r["outcome"] == "failed"], results
    hung = [r for r in results if r["outcome"] == "hung"]
    # Whatever hangs is the self-deadlock: the owner of mm_lock waits on mm_lock.
    for result in hung:
        assert result["self_deadlock"], result
        assert result["owner"] in result["waiters"], result
        waiting = next(t for t in result["threads"] if t["tid"] == result["owner"])
        assert waiting["syscall"] == 202 and waiting["futex"] == result["mm_lock"], waiting
    # Most runs of 10 s hang: missing in the whole budget means it stopped reproducing.
    assert hung, f"the race did not hit in {len(results)} runs of {SECONDS:g} s: {results}"
    assert all(r["allocator"] == "mimalloc" for r in hung), hung
    detail = madvise_deadlock.describe_hang(hung[0])
    assert "whose owner is thread" in detail
    if hung[0].get("backtrace"):  # gdb installed: the native chain, innermost first
        frames = madvise_deadlock._frames(hung[0]["backtrace"])
        assert "import_monitor_notify" in frames and "intercept_madvise" in frames, frames
        assert frames.index("intercept_madvise") < frames.index("repro_register"), frames


def test_a_reproduction_that_does_not_hit_fails_and_is_not_ok(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # mimalloc never purges with a delay of -1: no madvise inside malloc, no race to hit.
    monkeypatch.setenv("PMCA_REPRO_PURGE_DELAY", "-1")
    result = madvise_deadlock._reproduction(1, 2.0)
    assert result.outcome == "failed" and not result.ok, result
    assert "did not reproduce: 0 self-deadlocks in 1 runs" in result.detail


def test_a_child_whose_mimalloc_preload_did_not_take_refuses_to_run() -> None:
    env = {k: v for k, v in os.environ.items() if k != "LD_PRELOAD"}
    env["PMCA_REPRO_ALLOCATOR"] = "mimalloc"  # asked for, but not preloaded
    done = subprocess.run(
        [sys.executable, "-m", "pmca_madvise_deadlock", "ompi", "0.5", "2"],
        capture_output=True,
        text=True,
        env=env,
        timeout=60,
        check=False,
    )
    assert done.returncode != 0, done.stdout
    assert "allocator: asked for mimalloc, but malloc comes from" in done.stderr, done.stderr


def test_runs_report_the_allocator_they_ran_on(monkeypatch: pytest.MonkeyPatch) -> None:
    result = madvise_deadlock.run_design("pmca", runs=1, seconds=1.0)[0]
    assert result["outcome"] == "completed", result
    assert result["allocator"] == "mimalloc" and "mimalloc" in result["malloc_from"], result
    monkeypatch.setenv("PMCA_REPRO_ALLOCATOR", "glibc")
    result = madvise_deadlock.run_design("pmca", runs=1, seconds=1.0)[0]
    assert result["allocator"] == "glibc" and "libc" in result["malloc_from"], result


def test_a_hung_pmca_run_misses_the_benchmark_goal() -> None:
    """A pmca child stopped as hung (its limit is shorter than its run) shows no
    self-deadlock signature; the benchmark's goal counts it all the same."""
    benchmarks = Path(__file__).resolve().parents[2] / "benchmarks"
    sys.path.insert(0, str(benchmarks))
    try:
        import _goals
    finally:
        sys.path.remove(str(benchmarks))
    run_once = pytest.importorskip("pmca_madvise_deadlock.watchdog").run_once
    forced = run_once("pmca", 2.0, grace=0.05, with_gdb=False)
    assert forced["outcome"] == "hung" and not forced["self_deadlock"], forced
    reproduced = [{"outcome": "hung", "self_deadlock": True}]
    verdicts = {g.name: g.verdict for g in _goals.madvise_goals(reproduced, [forced])}
    assert verdicts["pmca runs that did not complete (hung or failed)"] == "MISS", verdicts
