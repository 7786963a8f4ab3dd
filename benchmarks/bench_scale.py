"""Opening every installed component, at 100, 500 and 2000 components, against pluggy.

N throwaway components of one throwaway framework are installed as real
distributions (one each, as third-party plugins ship) in a temporary
directory on ``sys.path``. In a fresh interpreter that has already imported
pmca (``pmca.Session`` included) and pluggy, one side is timed:

- ``pluggy`` (the baseline): ``PluginManager.load_setuptools_entrypoints``
  on the framework's entry-point group: metadata scan, import, registration;
- ``open``: ``pmca.Session(frameworks=[fw]).init()``: metadata scan, import,
  registration, each component's ``register``/``open``/``query`` hooks and
  the closing of the ones not selected;
- ``cycle``: the same init followed by ``finalize`` (every component closed).

Samples alternate between the sides (ABBA). The costs per component are
printed for every N: if they stay flat as N grows, the costs are linear.
"""

from __future__ import annotations

import sys
from pathlib import Path

import _common as common
import _goals as goals

FRAMEWORK = "benchscale"
COUNTS = (100, 500, 2000)
GOAL_COUNT = 500
SIDES = ("pluggy", "open", "cycle")


def child_sample(args: dict) -> None:
    import gc
    import time

    import pluggy

    import pmca

    framework, side = args["framework"], args["side"]
    assert pmca.Session is not None  # pmca's own modules are imported before the clock starts
    gc.collect()
    start = time.perf_counter()
    if side == "pluggy":
        manager = pluggy.PluginManager("pmca")
        manager.load_setuptools_entrypoints(f"pmca.{framework}")
        count = len(manager.get_plugins())
    else:
        session = pmca.Session(frameworks=[framework]).init()
        count = len(session.components(framework))
        if side == "cycle":
            session.finalize()
    elapsed = time.perf_counter() - start
    common.child_reply({"elapsed": elapsed, "count": count})


def measure(count: int, *, quick: bool, report: common.Report) -> dict[str, float]:
    script = Path(__file__).resolve()
    with common.work_dir("scale") as work:
        site = work / "site"
        components = [f"c{index:05d}" for index in range(count)]
        common.install_throwaway_framework(site, FRAMEWORK, components)
        env = common.child_env(site)

        def side(name: str) -> float:
            reply = common.run_child(script, "sample", {"framework": FRAMEWORK, "side": name}, env)
            if name == "pluggy" and reply["count"] != count:
                raise common.ChildFailed(f"pluggy registered {reply['count']} of {count}")
            return float(reply["elapsed"])

        repeats = 3 if quick else (5 if count > 500 else 9)
        # The warm-up round compiles the throwaway modules' bytecode for everyone.
        samples = common.interleave(
            {name: (lambda name=name: side(name)) for name in SIDES}, repeats=repeats, warmup=1
        )
    medians = {name: common.median(values) for name, values in samples.items()}
    common.heading(f"{count} components ({repeats} fresh interpreters per side)")
    ratios = {name: common.paired_ratio(samples[name], samples["pluggy"]) for name in SIDES}
    for name in SIDES:
        per = medians[name] / count
        print(
            f"    {name:7} {medians[name] * 1e3:9.1f} ms  {per * 1e6:7.1f} µs/component"
            f"  paired ratio to pluggy {ratios[name]:5.2f}  {common.raw(samples[name])}"
        )
    for name in ("open", "cycle"):
        report.ratios[f"{count} components: {name}/pluggy"] = ratios[name]
    if count == GOAL_COUNT:
        report.goals.append(
            goals.ratio_goal(
                f"open all {count} components / pluggy load_setuptools_entrypoints",
                samples["open"],
                samples["pluggy"],
                1.0,
            )
        )
    return {name: medians[name] / count for name in SIDES}


def main() -> int:
    args = common.parser(__doc__.splitlines()[0]).parse_args()
    common.use_working_tree()
    if common.serve_child(args, {"sample": child_sample}):
        return 0
    print(f"bench_scale: pmca from {common.pmca_location()}; python {sys.version.split()[0]}")
    report = common.Report("scale")
    counts = COUNTS[:2] if args.quick else COUNTS
    per_component = {count: measure(count, quick=args.quick, report=report) for count in counts}
    common.heading("cost per component, relative to the smallest N (1.0 = linear)")
    first = counts[0]
    for count in counts:
        growth = "  ".join(
            f"{name} {per_component[count][name] / per_component[first][name]:5.2f}"
            for name in SIDES
        )
        print(f"    N={count:5}: {growth}")
        if count != first:
            for name in ("open", "cycle"):
                report.ratios[f"{name} per component, N={count} / N={first}"] = (
                    per_component[count][name] / per_component[first][name]
                )
    report.emit()
    return 0


if __name__ == "__main__":
    sys.exit(main())
