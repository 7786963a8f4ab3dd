"""Every benchmark goal can fail: each goal function, fed a run that misses, says MISS.

The goal functions (``benchmarks/_goals.py``) are what the benchmarks judge
with; these tests give them made-up samples and runs -- no benchmark runs.
"""

from __future__ import annotations

import math
import sys
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

BENCHMARKS = Path(__file__).resolve().parent.parent / "benchmarks"


@pytest.fixture(scope="module")
def goals() -> Iterator[ModuleType]:
    sys.path.insert(0, str(BENCHMARKS))
    try:
        import _goals

        yield _goals
    finally:
        sys.path.remove(str(BENCHMARKS))


def _run(latency: float, bandwidth: dict[int, float]) -> dict[str, Any]:
    return {"latency_us": latency, "bandwidth": {str(k): v for k, v in bandwidth.items()}}


def test_a_paired_ratio_over_its_limit_misses(goals: ModuleType) -> None:
    goal = goals.ratio_goal("x / y", [3.0, 3.0, 3.0], [1.0, 1.0, 1.0], 1.5)
    assert not goal.met and goal.verdict == "MISS" and goal.value == 3.0
    assert goal.samples == [3.0, 3.0, 3.0]
    assert goals.ratio_goal("x / y", [1.0, 1.0], [1.0, 1.0], 1.5).met


def test_nothing_measured_is_a_miss_not_a_pass(goals: ModuleType) -> None:
    goal = goals.ratio_goal("x / y", [], [], 1.5)
    assert math.isnan(goal.value) and goal.verdict == "MISS"


def test_pingpong_latency_is_judged_on_the_median_of_pairs(goals: ModuleType) -> None:
    # Sides' medians: 20 / 4 = 5.0 (would pass <= 5); pairs: 5.26, 2.2, 7.5 -> 5.26.
    subject = [_run(10, {1 << 20: 100}), _run(20, {1 << 20: 100}), _run(30, {1 << 20: 100})]
    baseline = [_run(1.9, {1 << 20: 100}), _run(9, {1 << 20: 100}), _run(4, {1 << 20: 100})]
    ratios, judged = goals.pingpong_goals(
        "sm", subject, baseline, latency_limit=5.0, bandwidth_limit=1.11, big=1 << 20
    )
    latency = next(goal for goal in judged if "latency" in goal.name)
    assert latency.verdict == "MISS" and latency.value == pytest.approx(10 / 1.9)
    assert ratios["sm latency 8 B (pmca / baseline)"] == latency.value


def test_pingpong_bandwidth_below_the_baseline_misses(goals: ModuleType) -> None:
    subject = [_run(1, {1024: 50, 1 << 20: 50}), _run(1, {1024: 50, 1 << 20: 50})]
    baseline = [_run(1, {1024: 100, 1 << 20: 100}), _run(1, {1024: 100, 1 << 20: 100})]
    ratios, judged = goals.pingpong_goals(
        "tcp", subject, baseline, latency_limit=5.0, bandwidth_limit=1.11, big=1 << 20
    )
    # Only sizes >= big are judged; every size's paired ratio is reported.
    bandwidth = [goal for goal in judged if "bandwidth" in goal.name]
    assert [goal.name for goal in bandwidth] == ["tcp bandwidth 1048576 B, baseline / pmca"]
    assert bandwidth[0].verdict == "MISS" and bandwidth[0].value == 2.0
    assert ratios["tcp bandwidth 1024 B (baseline / pmca)"] == 2.0


def test_pingpong_mid_sizes_slower_than_the_limit_miss(goals: ModuleType) -> None:
    sizes = [1024, 4096, 65536, 262144, 1 << 20]
    fast = {size: 100.0 for size in sizes}
    slow = {**fast, 65536: 50.0}  # half the bandwidth: twice the time
    ratios, judged = goals.pingpong_goals(
        "sm",
        [_run(1, slow), _run(1, slow)],
        [_run(1, fast), _run(1, fast)],
        latency_limit=None,
        bandwidth_limit=None,
        big=1 << 20,
        mid_limit=1.5,
    )
    # Judged: 4 KiB ... 256 KiB; not 1 KiB, nor 1 MiB (which bandwidth_limit judges).
    assert [goal.name for goal in judged] == [
        f"sm bandwidth {size} B, baseline / pmca" for size in (4096, 65536, 262144)
    ]
    verdicts = {goal.name.split()[2]: goal.verdict for goal in judged}
    assert verdicts == {"4096": "PASS", "65536": "MISS", "262144": "PASS"}
    assert ratios["sm bandwidth 65536 B (baseline / pmca)"] == 2.0


def test_pingpong_without_limits_reports_ratios_and_judges_nothing(goals: ModuleType) -> None:
    ratios, judged = goals.pingpong_goals(
        "ofi tcp",
        [_run(4, {1024: 10})],
        [_run(2, {1024: 20})],
        latency_limit=None,
        bandwidth_limit=None,
        big=0,
    )
    assert judged == []
    assert ratios == {
        "ofi tcp latency 8 B (pmca / baseline)": 2.0,
        "ofi tcp bandwidth 1024 B (baseline / pmca)": 2.0,
    }


def _madvise(goals: ModuleType, reproduction: list[dict[str, Any]], prevention: list[Any]) -> Any:
    return {goal.name: goal for goal in goals.madvise_goals(reproduction, prevention)}


REPRODUCED = [{"outcome": "hung", "self_deadlock": True}]
GOOD = {"outcome": "completed", "coherent": True, "phases": 10}


def test_madvise_any_hung_pmca_run_misses(goals: ModuleType) -> None:
    # What a forced hang of pmca's child gives: no mm_lock address, so no signature.
    hung = {"outcome": "hung", "self_deadlock": False, "mm_lock": None}
    found = _madvise(goals, REPRODUCED, [GOOD, hung])
    goal = found["pmca runs that did not complete (hung or failed)"]
    assert goal.verdict == "MISS" and goal.value == 1
    failed = {"outcome": "failed", "returncode": -11}
    assert not _madvise(goals, REPRODUCED, [failed])[goal.name].met


def test_madvise_a_run_without_pmcas_hooks_misses(goals: ModuleType) -> None:
    for incoherent in ({**GOOD, "coherent": False}, {"outcome": "completed", "phases": 3}):
        found = _madvise(goals, REPRODUCED, [GOOD, incoherent])
        goal = found["pmca runs completed without pmca's hooks (coherent false)"]
        assert goal.verdict == "MISS", incoherent


def test_madvise_a_reproduction_that_did_not_reproduce_misses(goals: ModuleType) -> None:
    found = _madvise(goals, [{"outcome": "completed"}], [GOOD])
    goal = found["reproduction runs that self-deadlocked"]
    assert goal.verdict == "MISS" and goal.at_least
    assert all(g.met for g in _madvise(goals, REPRODUCED, [GOOD]).values())


def test_storm_lost_or_wrong_deliveries_miss(goals: ModuleType) -> None:
    clean = {"released": 10, "delivered": 10, "dropped": 0, "sums_match": True}
    assert all(goal.met for goal in goals.storm_goals("C", clean))
    for bad in ({"delivered": 9}, {"dropped": 1}, {"sums_match": False}):
        missed = [goal.name for goal in goals.storm_goals("C", {**clean, **bad}) if not goal.met]
        assert len(missed) == 1, (bad, missed)


def test_discovery_imports_miss_on_a_stray_or_a_missing_selection(goals: ModuleType) -> None:
    expected = ["fw_pick"]
    assert all(g.met for g in goals.import_goals("500", {"first": ["fw_pick"]}, expected))
    stray = goals.import_goals("500", {"first": ["fw_pick", "fw_other"]}, expected)
    assert [g.verdict for g in stray] == ["MISS", "PASS"]
    absent = goals.import_goals("500", {"first": []}, expected)
    assert [g.verdict for g in absent] == ["PASS", "MISS"]


def test_delivery_rate_below_goal_misses(goals: ModuleType) -> None:
    assert goals.rate_goal("per-event", [1e6, 1e6, 1e6], 5e6).verdict == "MISS"
    assert goals.rate_goal("per-event", [6e6, 6e6, 6e6], 5e6).verdict == "PASS"


def test_paired_difference_over_its_limit_misses(goals: ModuleType) -> None:
    goal = goals.difference_goal("import", [0.2, 0.2], [0.1, 0.1], 50.0)
    assert goal.verdict == "MISS" and goal.value == pytest.approx(100.0)


def test_session_cycle_and_rss_growth_over_their_limits_miss(goals: ModuleType) -> None:
    cycle = goals.median_goal("cycle", [0.001, 0.003, 0.004], 2.0)
    assert cycle.verdict == "MISS" and cycle.value == pytest.approx(3.0)
    mib = 1024 * 1024
    growth = goals.growth_goal("RSS growth", 100 * mib, [102 * mib], 1.0, scale=mib)
    assert growth.verdict == "MISS" and growth.value == 2.0
    assert goals.growth_goal("RSS growth", 100 * mib, [100 * mib], 1.0, scale=mib).met
    # A steady leak (0.2 MiB every block) counts in full; one step of 2 MiB, not at all.
    steady = [100 * mib + (block + 1) * mib // 5 for block in range(10)]
    leak = goals.growth_goal("RSS growth", 100 * mib, steady, 1.0, scale=mib)
    assert leak.verdict == "MISS" and leak.value == pytest.approx(2.0, rel=1e-3)
    once = [100 * mib] * 4 + [102 * mib] * 6
    assert goals.growth_goal("RSS growth", 100 * mib, once, 1.0, scale=mib).value == 0.0
    twice = [100 * mib] * 4 + [101 * mib] * 3 + [102 * mib] * 3
    assert goals.growth_goal("RSS growth", 100 * mib, twice, 1.0, scale=mib).verdict == "MISS"


def test_two_rails_not_enough_faster_than_one_miss(goals: ModuleType) -> None:
    # Times of a 64 MiB message per round: one rail, then two rails.
    fast = goals.rails_goal("rails", [2.0, 2.0, 2.1], [1.0, 1.05, 1.1], 1.8)
    assert fast.verdict == "PASS" and fast.at_least
    assert fast.samples == pytest.approx([2.0, 2.0 / 1.05, 2.1 / 1.1])
    # Two rails only a third faster than one: a miss, as is two rails slower.
    assert goals.rails_goal("rails", [2.0, 2.0], [1.5, 1.5], 1.8).verdict == "MISS"
    assert goals.rails_goal("rails", [1.0, 1.0], [2.0, 2.0], 1.8).verdict == "MISS"
    # Paired per round: medians 2.0 / 1.0 would pass; the pairs 4.0, 1.0, 1.0 give 1.0.
    paired = goals.rails_goal("rails", [4.0, 2.0, 1.0], [1.0, 2.0, 1.0], 1.8)
    assert paired.verdict == "MISS" and paired.value == 1.0
    nothing = goals.rails_goal("rails", [], [], 1.8)
    assert math.isnan(nothing.value) and nothing.verdict == "MISS"


def test_a_reported_ratio_of_jobs_is_paired_not_a_ratio_of_medians(goals: ModuleType) -> None:
    def cost(run: dict[str, Any]) -> float:
        return float(run["per_call"]["send_us"] + run["per_call"]["recv_us"])

    def job(send_us: float) -> dict[str, Any]:
        return {"per_call": {"send_us": send_us, "recv_us": 0.0}}

    # The sides' medians, 5 / 2, would say 2.5; the rounds' pairs 0.5, 2.5 and 1.0 say 1.0.
    subject = [job(1), job(5), job(6)]
    baseline = [job(2), job(2), job(6)]
    assert goals.run_ratio(subject, baseline, cost) == 1.0
    # A round one side did not run is left out, not paired with another round's job.
    assert goals.run_ratio(subject[:2], baseline, cost) == pytest.approx((0.5 + 2.5) / 2)


def test_same_job_every_size_is_judged_and_one_slow_size_misses(goals: ModuleType) -> None:
    # Side medians at 64 KiB: 13 / 10 = 1.3 (would miss); pairs 1.0, 1.05, 1.6 -> 1.05.
    table = {
        "8": {"pmca": [1.2, 1.2, 1.2], "mpi4py": [1.0, 1.0, 1.0]},
        "65536": {"pmca": [10.0, 13.0, 16.0], "mpi4py": [10.0, 12.38, 10.0]},
        "67108864": {"pmca": [2.0, 2.0, 2.0], "mpi4py": [1.0, 1.0, 1.0]},
    }
    ratios, judged = goals.same_job_goals("sm", table, limit=1.10, small=(8, 1.3))
    verdicts = {goal.name: goal for goal in judged}
    assert len(judged) == 3
    assert verdicts["sm 8 B, pmca / mpi4py"].met  # 1.2 within 8 B's own limit of 1.3
    assert verdicts["sm 8 B, pmca / mpi4py"].limit == 1.3
    mid = verdicts["sm 65536 B, pmca / mpi4py"]
    assert mid.met and mid.value == pytest.approx(13.0 / 12.38)
    big = verdicts["sm 67108864 B, pmca / mpi4py"]
    assert big.verdict == "MISS" and big.value == 2.0 and big.limit == 1.10
    assert ratios["sm 67108864 B (pmca / mpi4py)"] == 2.0
    # Without its own limit, 8 B is held to the common one and misses.
    _, strict = goals.same_job_goals("tcp", table, limit=1.10)
    assert strict[0].verdict == "MISS"


def test_same_job_without_samples_misses(goals: ModuleType) -> None:
    _, judged = goals.same_job_goals("tcp", {"8": {"pmca": [], "mpi4py": []}}, limit=1.10)
    assert judged[0].verdict == "MISS"


def test_a_sample_with_a_wrong_byte_misses(goals: ModuleType) -> None:
    assert goals.wrong_bytes_goal("tcp", {"pmca": 1, "mpi4py": 0}).verdict == "MISS"
    assert goals.wrong_bytes_goal("tcp", {"pmca": 0, "mpi4py": 2}).verdict == "MISS"
    assert goals.wrong_bytes_goal("tcp", {"pmca": 0, "mpi4py": 0}).met
