"""Seed scenario 2: the madvise self-deadlock under real mimalloc; pmca runs the same workload.

Each run is a child process with a hard time limit; a hung child is judged
from its native state (the thread asleep on ``mm_lock`` owns ``mm_lock``).
The reproduction is a race: ``benchmarks/bench_madvise_deadlock.py``
measures its rate over 30 runs of 10 s.
"""

from __future__ import annotations

import pytest

from pmca.scenarios import madvise_deadlock

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


def test_the_reproduction_hangs_only_in_its_own_lock() -> None:
    results = madvise_deadlock.run_design("ompi", runs=4, seconds=SECONDS, stop_at_first=True)
    assert not [r for r in results if r["outcome"] == "failed"], results
    hung = [r for r in results if r["outcome"] == "hung"]
    # Whatever hangs is the self-deadlock: the owner of mm_lock waits on mm_lock.
    for result in hung:
        assert result["self_deadlock"], result
        assert result["owner"] in result["waiters"], result
        waiting = next(t for t in result["threads"] if t["tid"] == result["owner"])
        assert waiting["syscall"] == 202 and waiting["futex"] == result["mm_lock"], waiting
    if not hung:
        pytest.xfail(
            f"the race did not hit in {len(results)} runs of {SECONDS:g} s "
            "(it hangs in most runs of 10 s; see bench_madvise_deadlock.py)"
        )
    detail = madvise_deadlock.describe_hang(hung[0])
    assert "whose owner is thread" in detail
    if hung[0].get("backtrace"):  # gdb installed: the native chain, innermost first
        frames = madvise_deadlock._frames(hung[0]["backtrace"])
        assert "import_monitor_notify" in frames and "intercept_madvise" in frames, frames
        assert frames.index("intercept_madvise") < frames.index("repro_register"), frames
