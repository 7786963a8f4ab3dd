"""How each benchmark judges its goals: pure functions of the samples and runs it measured.

Every goal is computed here from exactly what it names, over the runs it
names, so that ``tests/test_benchmark_goals.py`` can hand each one a run
that misses and see ``MISS`` without running a benchmark.  Ratios are
paired (see ``benchmarks/README.md``): each subject sample divided by the
baseline sample of its own round, the median of those reported.
"""

from __future__ import annotations

import statistics
from collections.abc import Callable, Mapping, Sequence
from itertools import pairwise
from typing import Any

from _common import Goal, paired_ratio, paired_ratios

__all__ = [
    "count_goal",
    "difference_goal",
    "growth_goal",
    "import_goals",
    "madvise_goals",
    "median_goal",
    "pingpong_goals",
    "rails_goal",
    "rate_goal",
    "ratio_goal",
    "run_ratio",
    "same_job_goals",
    "storm_goals",
    "wrong_bytes_goal",
]

#: One job's result of a ping-pong benchmark: ``latency_us`` and ``bandwidth`` (MB/s per size).
Run = Mapping[str, Any]


def ratio_goal(
    name: str, subject: Sequence[float], baseline: Sequence[float], limit: float
) -> Goal:
    """``subject / baseline`` paired per round, median of the pairs, at most ``limit``."""
    pairs = paired_ratios(subject, baseline)
    value = statistics.median(pairs) if pairs else float("nan")
    return Goal(name, value, limit, "x", samples=pairs)


def difference_goal(
    name: str,
    subject: Sequence[float],
    baseline: Sequence[float],
    limit: float,
    *,
    scale: float = 1e-3,
    unit: str = " ms",
) -> Goal:
    """``subject - baseline`` paired per round (in ``scale`` units), median, at most ``limit``."""
    pairs = [(s - b) / scale for s, b in zip(subject, baseline, strict=True)]
    value = statistics.median(pairs) if pairs else float("nan")
    return Goal(name, value, limit, unit, samples=pairs)


def count_goal(name: str, counts: Sequence[float], limit: float, unit: str = "") -> Goal:
    """The sum of per-run counts (overflows, strays...), at most ``limit``."""
    return Goal(name, float(sum(counts)), limit, unit, samples=list(counts))


def median_goal(
    name: str, samples: Sequence[float], limit: float, *, scale: float = 1e-3, unit: str = " ms"
) -> Goal:
    """The median of ``samples`` (in ``scale`` units), at most ``limit``."""
    scaled = [sample / scale for sample in samples]
    value = statistics.median(scaled) if scaled else float("nan")
    return Goal(name, value, limit, unit, samples=scaled)


def growth_goal(
    name: str, before: float, after_blocks: Sequence[float], limit: float, *, scale: float
) -> Goal:
    """Growth (in ``scale`` units: RSS) over blocks of cycles, its largest single step left out.

    ``after_blocks`` holds the reading after each block; each block's step
    is its reading minus the one before it (the first block's: minus
    ``before``). Something every cycle leaves behind grows every block
    alike; a one-off (a table the interpreter rebuilds larger once, an
    allocator's high water) is one step. The value is the sum of the steps
    without the largest, scaled back to every block: a steady leak counts in
    full, one one-off step not at all. With one block, its whole growth.
    """
    readings = [before, *after_blocks]
    steps = [later - earlier for earlier, later in pairwise(readings)]
    if len(steps) < 2:
        value = (readings[-1] - before) / scale
    else:
        value = (sum(steps) - max(steps)) * len(steps) / (len(steps) - 1) / scale
    return Goal(name, value, limit, " MiB", samples=[reading / scale for reading in readings])


def rate_goal(name: str, rates: Sequence[float], goal_rate: float) -> Goal:
    """Nanoseconds per event from per-round rates (events/s): the median, at most ``1e9/goal``."""
    per_event = [1e9 / rate if rate > 0 else float("inf") for rate in rates]
    value = statistics.median(per_event) if per_event else float("nan")
    return Goal(name, value, 1e9 / goal_rate, " ns", samples=per_event)


def rails_goal(
    name: str, one_rail: Sequence[float], two_rails: Sequence[float], limit: float
) -> Goal:
    """How much faster two rails are than one: ``one_rail / two_rails`` paired per round.

    ``one_rail[i]`` and ``two_rails[i]`` are the times of the same message in
    the same round; the median of the per-round ratios must be at least
    ``limit`` (a speed-up: higher is better).
    """
    pairs = paired_ratios(one_rail, two_rails)
    value = statistics.median(pairs) if pairs else float("nan")
    return Goal(name, value, limit, "x", at_least=True, samples=pairs)


def _paired_runs(
    subject: Sequence[Run], baseline: Sequence[Run], pick: Callable[[Run], float]
) -> tuple[list[float], list[float]]:
    """Picked figures of the rounds both sides ran (a side that failed a round drops it)."""
    rounds = min(len(subject), len(baseline))
    return [pick(run) for run in subject[:rounds]], [pick(run) for run in baseline[:rounds]]


def run_ratio(
    subject: Sequence[Run], baseline: Sequence[Run], pick: Callable[[Run], float]
) -> float:
    """A figure of each job, ``subject / baseline`` paired per round: a reported ratio.

    ``subject[i]`` and ``baseline[i]`` are the jobs of the same round; the
    median of the per-round ratios, not the ratio of the two sides' medians.
    """
    mine, theirs = _paired_runs(subject, baseline, pick)
    return paired_ratio(mine, theirs)


def pingpong_goals(
    label: str,
    subject: Sequence[Run],
    baseline: Sequence[Run],
    *,
    latency_limit: float | None,
    bandwidth_limit: float | None,
    big: int,
    mid_limit: float | None = None,
    mid: tuple[int, int] = (4 << 10, 256 << 10),
) -> tuple[dict[str, float], list[Goal]]:
    """Paired ratios of a ping-pong comparison, and its goals.

    ``subject[i]`` and ``baseline[i]`` are the jobs of the same round (ABBA).
    Latency: pmca / baseline per pair; bandwidth: baseline / pmca per pair
    (lower is better for both: the ratio of half round trips), judged for
    every size of at least ``big`` bytes against ``bandwidth_limit``, and for
    every size from ``mid[0]`` to ``mid[1]`` bytes against ``mid_limit``.
    A limit of ``None`` reports the ratio without a goal.
    """
    ratios: dict[str, float] = {}
    goals: list[Goal] = []
    mine, theirs = _paired_runs(subject, baseline, lambda run: float(run["latency_us"]))
    latency = ratio_goal(f"{label} latency 8 B, pmca / baseline", mine, theirs, 0.0)
    ratios[f"{label} latency 8 B (pmca / baseline)"] = latency.value
    if latency_limit is not None:
        latency.limit = latency_limit
        goals.append(latency)
    sizes = [int(size) for size in subject[0]["bandwidth"]] if subject else []
    for size in sizes:
        key = str(size)
        mine, theirs = _paired_runs(
            subject, baseline, lambda run, k=key: float(run["bandwidth"][k])
        )
        # baseline / pmca of bandwidths: the time ratio, lower is better.
        goal = ratio_goal(f"{label} bandwidth {size} B, baseline / pmca", theirs, mine, 0.0)
        ratios[f"{label} bandwidth {size} B (baseline / pmca)"] = goal.value
        if bandwidth_limit is not None and size >= big:
            goal.limit = bandwidth_limit
            goals.append(goal)
        elif mid_limit is not None and mid[0] <= size <= mid[1]:
            goal.limit = mid_limit
            goals.append(goal)
    return ratios, goals


def same_job_goals(
    label: str,
    table: Mapping[str, Mapping[str, Sequence[float]]],
    *,
    limit: float,
    small: tuple[int, float] | None = None,
) -> tuple[dict[str, float], list[Goal]]:
    """pmca's half round trip over mpi4py's, per size, from one job's paired rounds.

    ``table[size]`` holds each side's samples (``pmca``, ``mpi4py``), the
    i-th of both taken in the same round of the same job; each size's value
    is the median of the per-round ratios, at most ``limit`` (``small``:
    ``(size, limit)``, another limit for that size).
    """
    ratios: dict[str, float] = {}
    judged: list[Goal] = []
    for key, sides in table.items():
        size = int(key)
        bound = small[1] if small is not None and size == small[0] else limit
        goal = ratio_goal(f"{label} {size} B, pmca / mpi4py", sides["pmca"], sides["mpi4py"], bound)
        ratios[f"{label} {size} B (pmca / mpi4py)"] = goal.value
        judged.append(goal)
    return ratios, judged


def wrong_bytes_goal(label: str, wrong: Mapping[str, float]) -> Goal:
    """Samples whose received bytes differed from the sent ones, per side: none."""
    return count_goal(f"{label}: samples with a wrong byte (pmca, mpi4py)", list(wrong.values()), 0)


def madvise_goals(reproduction: Sequence[Run], prevention: Sequence[Run]) -> list[Goal]:
    """The madvise benchmark's goals, from every run of both designs.

    - every pmca run that did not complete counts (hung for any reason, or
      failed), not only the ones whose hang shows the self-deadlock signature;
    - a completed pmca run whose caches did not hear pmca's release events
      (``coherent`` false or missing) proves nothing and counts too;
    - the reproduction must reproduce (at least one self-deadlock), or the
      comparison is empty.
    """
    not_completed = [float(run["outcome"] != "completed") for run in prevention]
    incoherent = [
        float(run["outcome"] == "completed" and run.get("coherent") is not True)
        for run in prevention
    ]
    reproduced = [float(bool(run.get("self_deadlock"))) for run in reproduction]
    return [
        count_goal("pmca runs that did not complete (hung or failed)", not_completed, 0),
        count_goal("pmca runs completed without pmca's hooks (coherent false)", incoherent, 0),
        Goal(
            "reproduction runs that self-deadlocked",
            float(sum(reproduced)),
            1,
            at_least=True,
            samples=reproduced,
        ),
    ]


def storm_goals(variant: str, found: Mapping[str, Any]) -> list[Goal]:
    """The storm's goals: no overflow, every munmap delivered, the addresses delivered theirs."""
    missing = int(found["released"]) - int(found["delivered"])
    return [
        count_goal(f"storm, {variant}: overflows", [float(found["dropped"])], 0),
        count_goal(f"storm, {variant}: munmaps not delivered", [float(max(missing, 0))], 0),
        count_goal(
            f"storm, {variant}: delivered addresses differing from released",
            [0.0 if found["sums_match"] else 1.0],
            0,
        ),
    ]


def import_goals(
    label: str, imported: Mapping[str, Sequence[str]], expected: Sequence[str]
) -> list[Goal]:
    """Discovery's import goals: no unselected component imported, the selected one imported."""
    strays = [
        float(len([name for name in names if name not in expected])) for names in imported.values()
    ]
    absent = [float(any(name not in names for name in expected)) for names in imported.values()]
    return [
        Goal(
            f"{label}: unselected components imported", max(strays, default=0.0), 0, samples=strays
        ),
        count_goal(f"{label}: places where the selected component was not imported", absent, 0),
    ]
