"""Session init/finalize cycles per load mode: time per cycle and RSS growth.

Each variant runs in its own fresh interpreter: a session over a small
throwaway framework (two components, installed as real distributions) and,
when they open cleanly, over the memory hooks' frameworks (memory + patcher,
the goal of <= 2 ms per static cycle) and over every built-in framework
(btl included: no time goal), once as a default session (a world of one
rank builds its btl data path only at first use, so these cycles build none)
and once using the data path (``s.reach(0)``: modex, routes and p2p built
and torn down each cycle); each in ``static`` and ``dso`` load mode
(``mca_base_component_dso = all``).

After a warm-up, the cycles run in blocks that alternate with blocks of a
trivial loop of the same shape (an object with ``init``/``finalize`` that
copies its parameters), the baseline of the ratio. Resident memory
(``VmRSS``) is read after the warm-up and after each block; what the
cycles leave behind should stay under 1 MiB, or finalize leaves something
behind. It is judged without the largest single block's step (scaled back
to every block): something each cycle leaves behind grows every block
alike, while a one-off grows one block. In ``dso`` mode there is such a
one-off: each cycle imports the components' modules afresh, which interns
their names again in CPython's table of interned strings; once that
table's free slots run out it is rebuilt at the size its live entries
need, which after start-up is twice as large (about 400 KiB, allocated in
``marshal.loads`` and alive at the end under ``tracemalloc``), once, at a
cycle that depends on how many names the process interned before.
What is really in use is read at the same two points, to tell a leak from
allocator high water: Python's allocated blocks (``sys.getallocatedblocks``)
and glibc malloc's bytes in use (``mallinfo2``). RSS can grow while both
stay flat: freed memory that pymalloc's arenas or malloc's heap keep.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

import _common as common
import _goals as goals

FRAMEWORK = "benchsess"
COMPONENTS = ("alpha", "beta")
MODES: dict[str, dict[str, str]] = {
    "static": {},
    "dso": {"mca_base_component_dso": "all"},
}
GOAL_RSS_MIB = 1.0
#: A session cycle over the memory hooks' frameworks (memory + patcher), static load mode.
GOAL_BUILTIN_STATIC_CYCLE_MS = 2.0
MEMORY_FRAMEWORKS = ["patcher", "memory"]
#: The frameworks pmca ships, if its catalog cannot be asked.
FALLBACK_BUILTINS = ("patcher", "memory")


class TrivialSession:
    """The baseline: the shape of a session cycle with none of the work."""

    live: int = 0

    def __init__(self, mca: Mapping[str, Any], frameworks: Sequence[str]) -> None:
        self._mca = dict(mca)
        self._frameworks = list(frameworks)
        self._opened: list[str] = []

    def init(self) -> TrivialSession:
        TrivialSession.live += 1
        self._opened.extend(self._frameworks)
        return self

    def finalize(self) -> None:
        self._opened.clear()
        TrivialSession.live -= 1


def builtin_frameworks() -> list[str]:
    try:
        from pmca.runtime._catalog import Catalog
    except ImportError:
        return list(FALLBACK_BUILTINS)
    catalog = Catalog.discover()
    return [name for name, where in catalog.locations.items() if where.startswith("built-in")]


def _in_use() -> dict[str, int]:
    """Python's allocated blocks and, with glibc >= 2.33, malloc's bytes in use."""
    import ctypes

    found = {"python_blocks": sys.getallocatedblocks()}

    class _MallInfo2(ctypes.Structure):
        _fields_ = [
            (name, ctypes.c_size_t)
            for name in (
                "arena",
                "ordblks",
                "smblks",
                "hblks",
                "hblkhd",
                "usmblks",
                "fsmblks",
                "uordblks",
                "fordblks",
                "keepcost",
            )
        ]

    try:
        mallinfo2 = ctypes.CDLL(None).mallinfo2
    except (AttributeError, OSError):
        return found
    mallinfo2.restype = _MallInfo2
    info = mallinfo2()
    found["malloc_in_use"] = int(info.uordblks) + int(info.hblkhd)
    return found


def _cycle(factory: Callable[[], Any], *, use_data_path: bool = False) -> Callable[[int], None]:
    def run(count: int) -> None:
        for _ in range(count):
            session = factory().init()
            if use_data_path:
                session.reach(0)
            session.finalize()

    return run


def _first_session_problem(mca: Mapping[str, Any], frameworks: Sequence[str]) -> str | None:
    """Why this variant cannot be measured, if a first session does not open cleanly."""
    import pmca

    try:
        with pmca.Session(mca=mca, frameworks=frameworks) as session:
            failed = [str(f) for name in frameworks for f in session.failures(name)]
    except Exception as exc:
        return f"session init/finalize raised {type(exc).__name__}: {exc}"
    return f"components failed: {'; '.join(failed)}" if failed else None


def child_cycles(args: dict) -> None:
    import pmca

    frameworks = args["frameworks"] or builtin_frameworks()
    mca = MODES[args["mode"]]
    problem = _first_session_problem(mca, frameworks)
    if problem is not None:
        common.child_reply({"skipped": problem, "frameworks": frameworks})
        return
    subject = _cycle(
        lambda: pmca.Session(mca=mca, frameworks=frameworks),
        use_data_path=args.get("use_data_path", False),
    )
    baseline = _cycle(lambda: TrivialSession(mca, frameworks))
    subject(args["warmup"])
    baseline(args["warmup"])

    per_block = args["cycles"] // args["blocks"]
    common.timed(lambda: None)  # collects garbage before the reading below
    rss_before = common.rss_bytes()
    in_use_before = _in_use()
    trace: list[int] = []

    def session_block() -> float:
        elapsed = common.timed(lambda: subject(per_block)) / per_block
        trace.append(common.rss_bytes())
        return elapsed

    samples = common.interleave(
        {
            "trivial": lambda: common.timed(lambda: baseline(per_block)) / per_block,
            "session": session_block,
        },
        repeats=args["blocks"],
    )
    common.timed(lambda: None)
    in_use_after = _in_use()
    common.child_reply(
        {
            "in_use": {
                key: in_use_after[key] - value
                for key, value in in_use_before.items()
                if key in in_use_after
            },
            "frameworks": frameworks,
            "samples": samples,
            "cycles": per_block * args["blocks"],
            "rss_before": rss_before,
            "rss_after": common.rss_bytes(),
            "rss_trace": trace,
        }
    )


def measure(
    label: str,
    mode: str,
    frameworks: list[str] | None,
    env: Mapping[str, str],
    *,
    quick: bool,
    report: common.Report,
    optional: bool = False,
    cycle_goal: bool = False,
    use_data_path: bool = False,
) -> None:
    common.heading(f"{label}, {mode}")
    args = {
        "mode": mode,
        "frameworks": frameworks,
        "use_data_path": use_data_path,
        "cycles": 100 if quick else 1000,
        "warmup": 10 if quick else 100,
        "blocks": 5 if quick else 10,
    }
    try:
        reply = common.run_child(Path(__file__).resolve(), "cycles", args, env)
    except common.ChildFailed as exc:
        if not optional:
            raise
        reply = {"skipped": str(exc)}
    if "skipped" in reply:
        print(f"  skipped: {reply['skipped']}")
        report.notes.append(f"{label}, {mode}: skipped ({reply['skipped'].splitlines()[0]})")
        return
    trivial = common.median(reply["samples"]["trivial"])
    session = common.median(reply["samples"]["session"])
    growth = (reply["rss_after"] - reply["rss_before"]) / common.MIB
    print(f"  frameworks {reply['frameworks']}, {reply['cycles']} cycles after warm-up")
    samples = reply["samples"]
    print(
        f"  session  {common.format_seconds(session):>10}/cycle  {common.raw(samples['session'])}"
    )
    print(
        f"  trivial  {common.format_seconds(trivial):>10}/cycle  "
        f"{common.raw(samples['trivial'], 1e-6)} (µs)"
    )
    ratio = common.paired_ratio(samples["session"], samples["trivial"])
    print(f"  ratio    {ratio:,.0f}x the trivial loop (median of paired ratios)")
    trace = ", ".join(f"{value / common.MIB:.2f}" for value in reply["rss_trace"])
    before, after = reply["rss_before"] / common.MIB, reply["rss_after"] / common.MIB
    print(
        f"  VmRSS    {before:.2f} -> {after:.2f} MiB (growth {growth:+.3f} MiB);"
        f" after each block: [{trace}]"
    )
    in_use = reply.get("in_use", {})
    if in_use:
        malloc = in_use.get("malloc_in_use")
        shown = "n/a" if malloc is None else f"{malloc / 1024:+.1f} KiB"
        print(
            f"  in use   Python blocks {in_use['python_blocks']:+d}, malloc {shown} "
            "(a leak grows these; allocator high water grows only VmRSS)"
        )
    key = f"{label}, {mode}"
    report.ratios[f"{key}: session/trivial per cycle"] = ratio
    report.goals.append(
        goals.growth_goal(
            f"{key}: RSS growth, largest one-off step left out",
            reply["rss_before"],
            [*reply["rss_trace"][:-1], reply["rss_after"]],
            GOAL_RSS_MIB,
            scale=common.MIB,
        )
    )
    if cycle_goal:
        report.goals.append(
            goals.median_goal(
                f"{key}: session cycle", samples["session"], GOAL_BUILTIN_STATIC_CYCLE_MS
            )
        )


def main() -> int:
    args = common.parser(__doc__.splitlines()[0]).parse_args()
    common.use_working_tree()
    if common.serve_child(args, {"cycles": child_cycles}):
        return 0

    print(f"bench_sessions: pmca from {common.pmca_location()}; python {sys.version.split()[0]}")
    report = common.Report("sessions")
    with common.work_dir("sessions") as work:
        site = work / "site"
        common.install_throwaway_framework(site, FRAMEWORK, COMPONENTS)
        env = common.child_env(site)
        for mode in MODES:
            measure(
                f"throwaway {FRAMEWORK!r}", mode, [FRAMEWORK], env, quick=args.quick, report=report
            )
        # Without the throwaway site on the path, only what pmca (and the
        # environment) provides is there to open. The built-ins may be
        # mid-rewrite: a failure to open them is a note, not a crash.
        builtins_env = common.child_env()
        for mode in MODES:
            measure(
                "memory + patcher",
                mode,
                MEMORY_FRAMEWORKS,
                builtins_env,
                quick=args.quick,
                report=report,
                optional=True,
                cycle_goal=mode == "static",
            )
        # Every built-in framework: btl's sockets and segments make it no time
        # goal; leaks still count, with and without the data path built.
        for label, use_data_path in (
            ("all built-in frameworks", False),
            ("all built-in frameworks, data path used", True),
        ):
            for mode in MODES:
                measure(
                    label,
                    mode,
                    None,
                    builtins_env,
                    quick=args.quick,
                    report=report,
                    optional=True,
                    use_data_path=use_data_path,
                )
    report.emit()
    return 0


if __name__ == "__main__":
    sys.exit(main())
