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

**Slurm's ``srun``** (rows without a goal; needs root: a
:class:`pmca.testing.SlurmCluster` of 2 simulated hosts, 2 ranks each): the
world's build time and the session's first message (init, then rank 0
sends 8 bytes to every rank and gets them back) under ``srun --mpi=pmi2``
and ``--mpi=pmix`` with ``from_launcher()``, against ``from_mpi`` over Open
MPI's mpi4py under ``srun --mpi=pmix`` (its build includes ``MPI_Init``).
One sample per job (a world is built once per process), the three kinds of
job alternating; rank 0's times are reported.
"""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys
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


def _first_message(world: Any) -> float:
    """Session init and one 8-byte round trip between rank 0 and every rank, in seconds."""
    import pmca

    begin = time.perf_counter()
    with pmca.Session(mca=MCA, world=world) as s:
        p, buffer = s.p2p, bytearray(8)
        if p.rank == 0:
            for peer in range(1, p.size):
                p.send(peer, 1, b"8 bytes!")
            for peer in range(1, p.size):
                p.recv(peer, 2, buffer, timeout=60)
        else:
            p.recv(0, 1, buffer, timeout=60)
            p.send(0, 2, buffer)
        took = time.perf_counter() - begin
    return took


def _srun_role(args: dict[str, Any]) -> None:
    import pmca

    begin = time.perf_counter()
    if args["world"] == "mpi":  # MPI_Init included: what from_mpi costs a program
        from mpi4py import MPI

        world: Any = pmca.world.from_mpi(MPI.COMM_WORLD)
    else:
        world = pmca.world.from_launcher()
    built = time.perf_counter() - begin
    first = _first_message(world)
    description = world.description
    if args["world"] != "mpi":
        world.close()
    if world.rank == 0:
        common.child_reply({"built_s": built, "first_s": first, "world": description})


#: srun's jobs: label, --mpi, the world the ranks build.
SRUN_JOBS = (
    ("srun --mpi=pmix from_launcher", "pmix", "launcher"),
    ("srun --mpi=pmi2 from_launcher", "pmi2", "launcher"),
    ("srun --mpi=pmix from_mpi", "pmix", "mpi"),
)


def _srun(report: common.Report, script: Path, repeats: int) -> None:
    from pmca.testing import SlurmCluster, Testbed, slurm_requirements

    why = slurm_requirements()
    if why is not None:
        report.notes.append(f"srun rows skipped: {why}")
        return
    have_mpi = common.open_mpi() is not None and all(
        importlib.util.find_spec(name) for name in ("mpi4py", "cffi")
    )
    jobs = [job for job in SRUN_JOBS if have_mpi or job[1] == "pmi2"]
    if len(jobs) < len(SRUN_JOBS):
        report.notes.append("srun pmix rows skipped: needs pip install 'pmca[mpi,pmix]'")
    common.heading(f"srun: 2 hosts x 2 ranks, {repeats} jobs of each kind")
    samples: dict[str, dict[str, list[float]]] = {
        job[0]: {"built": [], "first": []} for job in jobs
    }
    worlds = {}
    with Testbed(2) as testbed, SlurmCluster(testbed) as cluster:
        for _ in range(repeats):
            for label, mpi, world in jobs:
                child = ["--child", "srun", "--child-args", json.dumps({"world": world})]
                done = cluster.srun(
                    [sys.executable, str(script), *child], nodes=2, tasks=4, mpi=mpi, timeout=300
                )
                replies = [line for line in done.stdout.splitlines() if line.startswith("{")]
                if done.returncode != 0 or not replies:
                    raise common.ChildFailed(f"{label}: {done.returncode}\n{done.stderr[-3000:]}")
                reply = json.loads(replies[-1])
                samples[label]["built"].append(reply["built_s"])
                samples[label]["first"].append(reply["first_s"])
                worlds[label] = reply["world"]
    for label, measured in samples.items():
        built, first = common.median(measured["built"]), common.median(measured["first"])
        print(
            f"  {label:32} world built {built * 1e3:7.1f} ms   first message {first * 1e3:7.1f} ms"
        )
        print(f"  {'':32} ({worlds[label]}; first message: {common.raw(measured['first'])})")
        report.notes.append(
            f"{label}: world built in {built * 1e3:.1f} ms, session init + first message "
            f"{first * 1e3:.1f} ms (medians of {len(measured['first'])} jobs)"
        )
    baseline = samples.get("srun --mpi=pmix from_mpi")
    for label, measured in samples.items():
        if baseline is not None and label != "srun --mpi=pmix from_mpi":
            ratio = common.median(measured["first"]) / common.median(baseline["first"])
            report.ratios[f"{label}: first message / from_mpi's"] = ratio


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
    if common.serve_child(args, {"world": _role, "srun": _srun_role}):
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
    _srun(report, script, 3 if args.quick else 7)
    report.emit()


if __name__ == "__main__":
    common.use_working_tree()
    main()
