"""The madvise self-deadlock reproduction's hang rate, and pmca's, over the same workload.

Runs ``plugins/pmca-madvise-deadlock``'s native workload under real
mimalloc, ``RUNS`` times for ``SECONDS`` each, in fresh child processes
with a hard limit: first Open MPI 5 + libfabric 2.5.1's design, then pmca's
(ring-only hooks, grdma).  A hang counts only if the process's native state
shows the self-deadlock (the owner of ``mm_lock`` asleep on ``mm_lock``).

Goal: pmca hangs in none of the runs.  Needs x86_64 and the plugin
(``pip install plugins/pmca-madvise-deadlock``); skipped otherwise.
"""

from __future__ import annotations

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
    report.emit()


if __name__ == "__main__":
    main()
