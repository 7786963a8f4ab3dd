"""The madvise self-deadlock on a model of Open MPI 5 + libfabric 2.5.1: hang rates, and pmca's.

Runs ``plugins/pmca-madvise-deadlock``'s native workload under real
mimalloc (each child checks that ``malloc`` is mimalloc's), ``RUNS`` times
for ``SECONDS`` each, in fresh child processes with a hard limit: first the
model of Open MPI's hooks calling the model cache's monitor in place, then
the same model cache and workload with pmca's hooks as its monitor (a
native thread drains pmca's ring into the cache's notify).  It is a model
because libfabric 2.5.1 reaches its own MR cache only from hardware
providers and for GPU IPC (the benchmark prints what the installed library
offers).

Goals: every pmca run completes (a hang of any kind, or a failure, counts),
with pmca's hooks in place and their events reaching the cache
(``coherent``); the model reproduces (at least one self-deadlock).  The
completed phases per run of each design are printed, to compare rates.
Needs x86_64 and the plugin (``pip install plugins/pmca-madvise-deadlock``);
skipped otherwise.
"""

from __future__ import annotations

import statistics

import _common as common
import _goals as goals

common.use_working_tree()


def main() -> None:
    args = common.parser(__doc__.splitlines()[0]).parse_args()
    from pmca.scenarios import madvise_deadlock

    runs, seconds = (5, 5.0) if args.quick else (30, 10.0)
    report = common.Report("bench_madvise_deadlock")
    why = madvise_deadlock.unavailable_reason()
    if why is not None:
        report.notes.append(f"skipped: {why}")
        report.emit()
        return
    results = {}
    for design in ("ompi", "pmca"):
        common.heading(f"{design}: {runs} runs of {seconds:g} s")
        results[design] = madvise_deadlock.run_design(design, runs=runs, seconds=seconds)
        for number, result in enumerate(results[design], 1):
            mark = "SELF-DEADLOCK" if result.get("self_deadlock") else result["outcome"]
            extra = f", {result['phases']} phases" if "phases" in result else ""
            print(f"  run {number:2d}: {mark}{extra}", flush=True)
        deadlocked = [r for r in results[design] if r.get("self_deadlock")]
        if deadlocked:
            print("  " + madvise_deadlock.describe_hang(deadlocked[0]))
        others = sum(r["outcome"] != "completed" for r in results[design]) - len(deadlocked)
        report.notes.append(
            f"{design}: {len(deadlocked)} of {runs} runs self-deadlocked, "
            f"{others} other failures or hangs"
        )
    report.goals.extend(goals.madvise_goals(results["ompi"], results["pmca"]))
    for design, runs_of in results.items():
        phases = [float(r["phases"]) for r in runs_of if r["outcome"] == "completed"]
        if phases:
            per_second = statistics.median(phases) / seconds
            report.ratios[f"{design}: cache lifetimes per second (median of completed runs)"] = (
                per_second
            )
    report.notes.append(f"a model: {madvise_deadlock.why_a_model()}")
    report.emit()


if __name__ == "__main__":
    main()
