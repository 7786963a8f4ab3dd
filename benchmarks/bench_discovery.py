"""Discovery + selection of one component among 500, against a bare entry-point scan.

500 throwaway components of a throwaway framework (itself declared through
``pmca.frameworks``) are installed as real distributions in a temporary
directory on ``sys.path``. Three things are timed:

- ``scan`` (the baseline): ``importlib_metadata.entry_points(group="pmca.<fw>")``;
- ``session``: ``pmca.Session(mca={fw: one}, frameworks=[fw])`` init + finalize;
- ``narrow``: framework discovery, component discovery, the selection filter
  and the import of the one selected component, without a session around them.

``importlib_metadata`` caches directory listings per process, so the sides are
compared twice with the same cache state on both: *cold* (each sample is the
first call in a fresh interpreter that has already imported pmca) and *warm*
(repeated calls in one interpreter after a warm-up). The benchmark also
checks, through ``sys.modules``, that only the selected component was imported.
"""

from __future__ import annotations

import importlib
import sys
from collections.abc import Callable
from pathlib import Path

import _common as common
import _goals as goals

FRAMEWORK = "benchdisc"
COUNT = 500
PICK = "c0250"
GOAL_RATIO = 1.5
LAYOUTS = {
    # name -> one distribution per component?
    f"{COUNT} distributions x 1 entry point": True,
    f"1 distribution x {COUNT} entry points": False,
}
SIDES = ("scan", "session", "narrow")


# -- what the children run --------------------------------------------------------


def _subjects(framework: str, pick: str) -> dict[str, Callable[[], object]]:
    """The timed operations, by side; ``narrow`` is left out if pmca's internals moved."""
    import importlib_metadata

    import pmca

    # pmca imports its parts at first use: import them now, so that "cold"
    # keeps meaning "pmca imported, nothing scanned or selected yet".
    importlib.import_module("pmca.runtime")
    for framework_name in ("memory", "patcher"):
        importlib.import_module(f"pmca.{framework_name}._framework")

    def scan() -> object:
        return list(importlib_metadata.entry_points(group=f"pmca.{framework}"))

    def session() -> object:
        pmca.Session(mca={framework: pick}, frameworks=[framework]).init().finalize()
        return None

    subjects: dict[str, Callable[[], object]] = {"scan": scan, "session": session}
    try:
        from pmca.mca._discovery import discover_components
        from pmca.mca._selection import parse_selection
        from pmca.runtime._catalog import Catalog
    except ImportError:
        return subjects

    def narrow() -> object:
        catalog = Catalog.discover()
        declared = catalog.get(framework)
        selection = parse_selection(pick, parameter=framework)
        found = discover_components(declared, [], catalog.entry_points)
        return [c.load() for name, c in found.candidates.items() if selection.admits(name)]

    subjects["narrow"] = narrow
    return subjects


def _imported_components(framework: str, before: set[str]) -> list[str]:
    new = set(sys.modules) - before
    return sorted(name for name in new if common.is_component_module(framework, name))


def child_cold(args: dict) -> None:
    """One cold sample of one side: the first call in this interpreter."""
    subjects = _subjects(args["framework"], args["pick"])
    function = subjects.get(args["side"])
    if function is None:
        common.child_reply({"elapsed": None})
        return
    before = set(sys.modules)
    elapsed = common.timed(function)
    common.child_reply(
        {"elapsed": elapsed, "imported": _imported_components(args["framework"], before)}
    )


def child_profile(args: dict) -> None:
    """Where a warm session's time goes: cProfile's top entries, printed as text."""
    import cProfile
    import io
    import pstats

    session = _subjects(args["framework"], args["pick"])["session"]
    session()
    profile = cProfile.Profile()
    profile.runcall(lambda: [session() for _ in range(args["repeats"])])
    out = io.StringIO()
    pstats.Stats(profile, stream=out).sort_stats("cumulative").print_stats(30)
    common.child_reply({"text": out.getvalue()})


def child_warm(args: dict) -> None:
    """Interleaved repetitions of every side in one interpreter, after a warm-up."""
    subjects = _subjects(args["framework"], args["pick"])
    before = set(sys.modules)
    subjects["session"]()  # the first session imports the selected component, if anything
    imported = _imported_components(args["framework"], before)
    samples = common.interleave(
        {side: (lambda f=f: common.timed(f)) for side, f in subjects.items()},
        repeats=args["repeats"],
        warmup=2,
    )
    common.child_reply({"samples": samples, "imported": imported})


# -- the parent -------------------------------------------------------------------


def measure_layout(label: str, site: Path, *, quick: bool, report: common.Report) -> None:
    env = common.child_env(site)
    script = Path(__file__).resolve()
    base = {"framework": FRAMEWORK, "pick": PICK}
    expected = [common.component_module(FRAMEWORK, PICK)]
    imported: dict[str, list[str]] = {}

    def cold(side: str) -> Callable[[], float]:
        def sample() -> float:
            reply = common.run_child(script, "cold", base | {"side": side}, env)
            if reply["elapsed"] is None:
                return float("nan")
            if side == "session":
                imported["cold session"] = reply["imported"]
            return float(reply["elapsed"])

        return sample

    common.heading(f"{label}: cold (each sample a fresh interpreter)")
    cold_samples = common.interleave(
        {side: cold(side) for side in SIDES}, repeats=3 if quick else 11
    )
    common.heading(f"{label}: warm (one interpreter, after warm-up)")
    warm = common.run_child(script, "warm", base | {"repeats": 5 if quick else 31}, env)
    imported["first session"] = warm["imported"]

    for state, samples in (("cold", cold_samples), ("warm", warm["samples"])):
        print(f"\n  [{state}] medians, median of paired ratios, raw samples (ms):")
        for side in SIDES:
            values = [v for v in samples.get(side, []) if v == v]  # NaN: side unavailable
            if not values:
                print(f"    {side:8} skipped (pmca internals it uses are not there)")
                continue
            ratio = common.paired_ratio(samples[side], samples["scan"])
            print(
                f"    {side:8} {common.format_seconds(common.median(values)):>10}"
                f"  ratio {ratio:5.2f}  {common.raw(values)}"
            )
            if side != "scan":
                key = f"{label} [{state}] {side}/scan"
                report.ratios[key] = ratio
                if side == "session":
                    report.goals.append(
                        goals.ratio_goal(key, samples[side], samples["scan"], GOAL_RATIO)
                    )

    print(f"\n  selected {PICK!r}; component modules imported (expected only {expected}):")
    strays = 0
    for where, names in imported.items():
        unexpected = [name for name in names if name not in expected]
        strays = max(strays, len(unexpected))
        if names == expected:
            verdict = "ok"
        elif unexpected:
            verdict = f"UNEXPECTED: {unexpected}"
        else:
            verdict = "the selected component was NOT imported"
            report.notes.append(f"{label} ({where}): the selected component was not imported")
        print(f"    {where:14} {names}  {verdict}")
    report.goals.extend(goals.import_goals(label, imported, expected))


def main() -> int:
    options = common.parser(__doc__.splitlines()[0])
    options.add_argument(
        "--profile", action="store_true", help="also print a cProfile of the session side"
    )
    args = options.parse_args()
    common.use_working_tree()
    if common.serve_child(args, {"cold": child_cold, "warm": child_warm, "profile": child_profile}):
        return 0

    print(f"bench_discovery: {COUNT} components of framework {FRAMEWORK!r}, selecting {PICK!r}")
    print(f"pmca from {common.pmca_location()}; python {sys.version.split()[0]}")
    report = common.Report("discovery")
    layouts = list(LAYOUTS.items())[:1] if args.quick else list(LAYOUTS.items())
    for label, per_component in layouts:
        with common.work_dir("discovery") as work:
            site = work / "site"
            components = [f"c{index:04d}" for index in range(COUNT)]
            common.install_throwaway_framework(
                site, FRAMEWORK, components, one_distribution_per_component=per_component
            )
            measure_layout(label, site, quick=args.quick, report=report)
            if args.profile:
                repeats = 5 if args.quick else 20
                common.heading(f"{label}: cProfile of {repeats} warm sessions")
                profile = common.run_child(
                    Path(__file__).resolve(),
                    "profile",
                    {"framework": FRAMEWORK, "pick": PICK, "repeats": repeats},
                    common.child_env(site),
                )
                print(profile["text"])
    report.emit()
    return 0


if __name__ == "__main__":
    sys.exit(main())
