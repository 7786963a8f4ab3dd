"""Run every ``bench_*.py`` here, one subprocess each, and summarize ratios and goals.

Benchmarks inform, they do not gate: a missed goal still exits 0. A benchmark
that crashes (non-zero exit) makes this script exit 1.

    python benchmarks/run.py [--quick] [NAME ...]

``NAME`` picks benchmarks by substring (``run.py discovery``).
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import _common as common


@dataclass
class Outcome:
    script: str
    returncode: int
    seconds: float
    result: dict | None = None

    @property
    def crashed(self) -> bool:
        return self.returncode != 0


def run_one(script: Path, quick: bool) -> Outcome:
    """Run one benchmark, echoing its output live and keeping its result line."""
    command = [sys.executable, str(script), *(["--quick"] if quick else [])]
    print(f"\n{'=' * 78}\n$ {' '.join([Path(sys.executable).name, script.name, *command[2:]])}")
    print("=" * 78, flush=True)
    start = time.perf_counter()
    result: dict | None = None
    # The working tree goes on the child's path, so that benchmarks not
    # written against _common (bench_hooks.py) measure the same pmca.
    with subprocess.Popen(
        command, stdout=subprocess.PIPE, text=True, env=common.child_env(), bufsize=1
    ) as process:
        assert process.stdout is not None
        for line in process.stdout:
            if line.startswith(common.RESULT_MARKER):
                result = json.loads(line[len(common.RESULT_MARKER) :])
                continue
            print(line, end="", flush=True)
    return Outcome(script.name, process.returncode, time.perf_counter() - start, result)


def summarize(outcomes: list[Outcome]) -> None:
    print(f"\n{'=' * 78}\nSUMMARY (ratios are subject / same-run baseline; lower is better)")
    print("=" * 78)
    for outcome in outcomes:
        status = f"CRASHED (exit {outcome.returncode})" if outcome.crashed else "ok"
        print(f"\n{outcome.script}: {status}, {outcome.seconds:.1f} s")
        if outcome.result is None:
            if not outcome.crashed:
                print("  (no machine-readable result; see its output above)")
            continue
        for name, ratio in outcome.result["ratios"].items():
            print(f"  ratio  {ratio:>10.3g}x  {name}")
        for goal in outcome.result["goals"]:
            verdict = "PASS" if goal["met"] else "MISS"
            sign = ">=" if goal.get("at_least") else "<="
            print(
                f"  {verdict}   {goal['value']:>9.3g}{goal['unit']} (goal {sign} {goal['limit']:g}"
                f"{goal['unit']})  {goal['name']}"
            )
        for note in outcome.result["notes"]:
            print(f"  note   {note}")
    goals = [goal for o in outcomes if o.result for goal in o.result["goals"]]
    missed = sum(not goal["met"] for goal in goals)
    crashed = [o.script for o in outcomes if o.crashed]
    print(
        f"\n{len(goals) - missed}/{len(goals)} goals met"
        + (f"; CRASHED: {', '.join(crashed)}" if crashed else "")
    )


def main() -> int:
    options = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    options.add_argument("--quick", action="store_true", help="short smoke runs")
    options.add_argument("names", nargs="*", help="only benchmarks whose file name contains one")
    args = options.parse_args()
    scripts = sorted(common.BENCH_DIR.glob("bench_*.py"))
    if args.names:
        scripts = [s for s in scripts if any(name in s.name for name in args.names)]
    if not scripts:
        print("no benchmarks matched", file=sys.stderr)
        return 2
    outcomes = [run_one(script, args.quick) for script in scripts]
    summarize(outcomes)
    return 1 if any(outcome.crashed for outcome in outcomes) else 0


if __name__ == "__main__":
    sys.exit(main())
