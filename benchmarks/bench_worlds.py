"""Session init over a world from the launcher (PMIx, PMI) against one from mpi4py.

Four ranks under each launcher, every rank alternating in ABBA order, in one
job per launcher:

- **Open MPI's ``mpirun``**: subject ``pmca.world.from_pmix()``, baseline
  ``pmca.world.from_mpi(MPI.COMM_WORLD)`` (MPI initialized first: Open MPI
  5.0 must be);
- **MPICH's ``mpiexec``** (the ``mpich`` wheel and its mpi4py, in an
  environment of their own that imports this pmca): subject
  ``pmca.world.from_pmi()``, baseline ``from_mpi`` over MPICH.

One sample is ``pmca.Session(mca={"btl": "self,sm,tcp"}, world=w)`` init +
finalize (modex, connections, teardown), every rank starting together after
an MPI barrier; rank 0's times are reported. Both worlds are built once,
before the samples (what a tool pays once per process; printed apart). The
modex entry's size per rank (bytes given to the world's allgather) is
reported too.

Goal: session init with a launcher's world <= 1.25x the one with mpi4py's,
for each launcher. Each side is skipped, with a note, when its launcher or
mpi4py (or, for PMIx, cffi) is missing.
"""

from __future__ import annotations

import subprocess
import time
from pathlib import Path
from typing import Any

import _common as common
from _goals import ratio_goal

GOAL_RATIO = 1.25
RANKS = 4
MCA = {"btl": "self,sm,tcp"}


class _Counting:
    """A world that delegates to another and records what the modex gives it."""

    def __init__(self, world: Any) -> None:
        self._world = world
        self.rank, self.size = world.rank, world.size
        self.description = world.description
        self.sizes: list[int] = []

    def allgather(self, data: bytes, *, timeout: float | None = None) -> list[bytes]:
        self.sizes.append(len(data))
        return list(self._world.allgather(data, timeout=timeout))

    def barrier(self, *, timeout: float | None = None) -> None:
        self._world.barrier(timeout=timeout)

    def locality(self) -> Any:
        get = getattr(self._world, "locality", None)
        return get() if get is not None else None

    def notice_fd(self) -> int | None:
        get = getattr(self._world, "notice_fd", None)
        return get() if get is not None else None

    def peer_notices(self) -> list[Any]:
        get = getattr(self._world, "peer_notices", None)
        return get() if get is not None else []


def _role(args: dict[str, Any]) -> None:
    from mpi4py import MPI

    import pmca

    comm = MPI.COMM_WORLD
    start = time.perf_counter()
    launcher_world = pmca.world.from_pmix() if args["kind"] == "pmix" else pmca.world.from_pmi()
    built = time.perf_counter() - start
    worlds = {"launcher": _Counting(launcher_world), "mpi": _Counting(pmca.world.from_mpi(comm))}

    def sample(name: str) -> float:
        comm.Barrier()
        begin = time.perf_counter()
        pmca.Session(mca=MCA, world=worlds[name]).init().finalize()
        return time.perf_counter() - begin

    samples = common.interleave(
        {name: (lambda name=name: sample(name)) for name in worlds},
        repeats=args["repeats"],
        warmup=1,
    )
    launcher_world.close()
    if comm.Get_rank() == 0:
        common.child_reply(
            {
                "samples": samples,
                "built_s": built,
                "world": launcher_world.description,
                "modex_bytes": {name: w.sizes[-1] for name, w in worlds.items()},
                "pmca": common.pmca_location(),
            }
        )


def _mpich(pmca_dir: Path, shim: Path) -> tuple[common.MpiLauncher, str, dict[str, str]]:
    """MPICH's launcher and Python, with this pmca importable (and nothing else of ours)."""
    bin_dir = common.peer_venv(
        "mpich-worlds",
        ["mpich", "mpi4py>=4.0", "pluggy", "attrs", "structlog", "importlib-metadata"],
    )
    (shim / "pmca").symlink_to(pmca_dir)
    launcher = common.MpiLauncher(str(bin_dir / "mpiexec"))
    return launcher, str(bin_dir / "python"), {"PYTHONPATH": str(shim)}


def _summarize(report: common.Report, label: str, result: dict[str, Any]) -> None:
    launcher, mpi = result["samples"]["launcher"], result["samples"]["mpi"]
    name = f"{label}: session init with the launcher's world / from_mpi"
    goal = ratio_goal(name, launcher, mpi, GOAL_RATIO)
    print(f"\n{label}: {result['world']} (pmca from {result['pmca']})")
    print(f"  world built once in {result['built_s'] * 1e3:.1f} ms")
    print(f"  session init+finalize, launcher's world: {common.raw(launcher)}")
    print(f"  session init+finalize, mpi4py's world:   {common.raw(mpi)}")
    print(f"  modex bytes per rank: {result['modex_bytes']}")
    report.ratios[f"{label} session / from_mpi"] = goal.value
    report.goals.append(goal)
    report.notes.append(f"{label} modex entry: {result['modex_bytes']['launcher']} bytes per rank")


def main() -> None:
    args = common.parser(__doc__ or "").parse_args()
    if common.serve_child(args, {"world": _role}):
        return
    report = common.Report("worlds")
    repeats = 5 if args.quick else 15
    script = Path(__file__).resolve()
    openmpi = common.open_mpi_or_skip(
        report, modules=("mpi4py", "cffi"), extra="mpi,pmix", part="PMIx"
    )
    if openmpi is not None:
        common.heading(f"PMIx: {RANKS} ranks under mpirun")
        result = openmpi.run(script, "world", {"kind": "pmix", "repeats": repeats}, ranks=RANKS)
        _summarize(report, "PMIx", result)
    common.heading(f"PMI: {RANKS} ranks under MPICH's mpiexec")
    import pmca

    with common.work_dir("worlds") as shim:
        try:
            launcher, python, env = _mpich(Path(pmca.__file__).resolve().parent, shim)
        except subprocess.CalledProcessError as exc:  # no mpich wheel to be had
            report.notes.append(f"PMI side skipped: cannot install mpich and mpi4py ({exc})")
        else:
            result = launcher.run(
                script,
                "world",
                {"kind": "pmi", "repeats": repeats},
                ranks=RANKS,
                python=python,
                env=env,
                keep_pythonpath=False,
            )
            _summarize(report, "PMI", result)
    report.emit()


if __name__ == "__main__":
    common.use_working_tree()
    main()
