"""Run every ``bench_*.py`` here, one subprocess each, and summarize ratios and goals.

Benchmarks inform, they do not gate: a missed goal still exits 0. A benchmark
that crashes (non-zero exit) makes this script exit 1.

    python benchmarks/run.py [--quick] [NAME ...]

``NAME`` picks benchmarks by substring (``run.py discovery``).

Besides the text, each run leaves a report directory,
``benchmarks/report/<UTC time>/`` (``--report-dir`` to put it elsewhere):
``results.json`` (every benchmark's result with its raw samples, and the
load average sampled during the run), ``output.txt``, one PNG per
comparison and ``report.md`` (see ``_report.py``). ``report/latest`` points
at the newest; earlier ones are kept for ``compare.py OLD NEW``.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import sys
import threading
import time
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import _common as common
import _report


class LoadSampler:
    """The 1-minute load average, read every ``interval`` seconds while the benchmarks run."""

    def __init__(self, interval: float = 5.0) -> None:
        self.samples: list[tuple[float, float]] = []
        self._interval = interval
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="load-sampler", daemon=True)

    def _run(self) -> None:
        while True:
            self.samples.append((time.time(), os.getloadavg()[0]))
            if self._stop.wait(self._interval):
                return

    def __enter__(self) -> LoadSampler:
        self._thread.start()
        return self

    def __exit__(self, *_: object) -> None:
        self._stop.set()
        self._thread.join()
        self.samples.append((time.time(), os.getloadavg()[0]))

    def between(self, start: float, end: float) -> dict[str, Any]:
        inside = [load for when, load in self.samples if start <= when <= end]
        return {"samples": inside or [os.getloadavg()[0]], "cpus": os.cpu_count()}


@dataclass
class Outcome:
    script: str
    returncode: int
    seconds: float
    result: dict | None = None
    started: float = 0.0
    output: list[str] = field(default_factory=list)

    @property
    def crashed(self) -> bool:
        return self.returncode != 0


def run_one(script: Path, quick: bool) -> Outcome:
    """Run one benchmark, echoing its output live and keeping its result line."""
    command = [sys.executable, str(script), *(["--quick"] if quick else [])]
    header = f"\n{'=' * 78}\n$ {' '.join([Path(sys.executable).name, script.name, *command[2:]])}"
    print(header)
    print("=" * 78, flush=True)
    output = [header, "=" * 78]
    started = time.time()
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
            output.append(line.rstrip("\n"))
    seconds = time.perf_counter() - start
    return Outcome(script.name, process.returncode, seconds, result, started, output)


def write_report(
    directory: Path, outcomes: list[Outcome], load: LoadSampler, started: float, quick: bool
) -> Path:
    """``results.json``, ``output.txt`` and the rendered report; ``latest`` then points here."""
    directory.mkdir(parents=True, exist_ok=True)
    stamp = datetime.fromtimestamp
    results = {
        "started": stamp(started, timezone.utc).isoformat(timespec="seconds"),
        "finished": stamp(time.time(), timezone.utc).isoformat(timespec="seconds"),
        "quick": quick,
        "python": f"Python {platform.python_version()}",
        "platform": platform.platform(),
        "load": load.between(started, time.time()),
        "benchmarks": [
            {
                "script": o.script,
                "returncode": o.returncode,
                "seconds": o.seconds,
                "load": load.between(o.started, o.started + o.seconds),
                "result": o.result,
            }
            for o in outcomes
        ],
    }
    (directory / _report.RESULTS).write_text(json.dumps(results, indent=1), encoding="utf-8")
    text = "\n".join(line for o in outcomes for line in o.output)
    (directory / "output.txt").write_text(text + "\n", encoding="utf-8")
    markdown = _report.render(directory)
    latest = directory.parent / "latest"
    if latest.is_symlink() or not latest.exists():
        latest.unlink(missing_ok=True)
        latest.symlink_to(directory.name)
    return markdown


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
    options.add_argument(
        "--report-dir",
        type=Path,
        default=common.BENCH_DIR / "report",
        help="where each run's report directory goes (default: benchmarks/report)",
    )
    args = options.parse_args()
    scripts = sorted(common.BENCH_DIR.glob("bench_*.py"))
    if args.names:
        scripts = [s for s in scripts if any(name in s.name for name in args.names)]
    if not scripts:
        print("no benchmarks matched", file=sys.stderr)
        return 2
    started = time.time()
    with LoadSampler() as load:
        outcomes = [run_one(script, args.quick) for script in scripts]
    summarize(outcomes)
    stamp = datetime.fromtimestamp(started, timezone.utc).strftime("%Y%m%dT%H%M%SZ")
    markdown = write_report(args.report_dir / stamp, outcomes, load, started, args.quick)
    print(f"\nreport: {markdown}")
    return 1 if any(outcome.crashed for outcome in outcomes) else 0


if __name__ == "__main__":
    sys.exit(main())
