"""pmca's p2p against mpi4py in ONE job, each peer in its best configuration, with the floor.

What a user choosing between pmca's p2p and mpi4py would try: one 2-rank
job in which pmca (``Session.p2p.send``/``recv``) and mpi4py
(``comm.Send``/``comm.Recv``) alternate in the same two processes, ABBA,
paired per round, on the buffers users pass (numpy ``uint8`` arrays, then
bytearrays).  Each sample is a block of ping-pongs; ``into`` is zeroed
before it and compared with the sent bytes after it, on both ranks, so a
sample with a wrong byte is counted (a goal: none).

The peer runs in its best configuration for the transport (:data:`PEERS`),
both sides busy-polling (a second table has both yielding), and the floor
is printed beside every row: ``floor.c`` (built with gcc into
``benchmarks/.work/``) ping-pongs over the same transport with no Python
and no MPI, and times one core's memcpy of the size.
"""

from __future__ import annotations

import shutil
import statistics
import subprocess
import sys
import venv
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import _common as common
import _goals as goals

__all__ = [
    "GOAL_RATIO",
    "GOAL_SM_SMALL_RATIO",
    "PEERS",
    "POLLING",
    "SIZES",
    "Peer",
    "compare",
    "floors",
    "mpich_python",
    "pmca_config",
    "role",
]

#: 8 B, then every power of 4 from 64 B to 64 MiB.
SIZES = [8, *(1 << k for k in range(6, 27, 2))]
#: pmca's half round trip over mpi4py's, numpy buffers, busy polling: at every size ...
GOAL_RATIO = 1.10
#: ... but 8 B over shared memory, where a Python call's own cost weighs most.
GOAL_SM_SMALL_RATIO = 1.3
#: Bytes one sample moves each way (iterations = budget / size, 3 to 2000).
BUDGET = 64 << 20
QUICK_BUDGET = 4 << 20

#: Both sides polling (``busy``: the judged table) or yielding between polls.
POLLING: dict[str, dict[str, dict[str, str]]] = {
    "busy-polling": {
        "ompi": {"mpi_yield_when_idle": "0"},
        "pmca": {"mpi_yield_when_idle": "0", "btl_base_wait_spin": "1000"},
    },
    "yielding": {
        "ompi": {"mpi_yield_when_idle": "1"},
        "pmca": {"mpi_yield_when_idle": "1"},
    },
}

BENCH_DIR = Path(__file__).resolve().parent
WORK = BENCH_DIR / ".work"
MPICH_VENV = WORK / "mpich-venv"
ROOT = BENCH_DIR.parent


@dataclass(frozen=True)
class Peer:
    """One peer's best configuration for a transport (pmca's for it: :func:`pmca_config`)."""

    label: str
    transport: str  # "tcp" or "sm": pmca's btl, and the floor
    mpi: str  # "Open MPI" or "MPICH"
    mca: Mapping[str, str] = field(default_factory=dict)  # the launcher's --mca
    env: Mapping[str, str] = field(default_factory=dict)  # the job's environment
    interface: str = "lo"  # where its tcp goes, and so pmca's


def _network_interface() -> str:
    """The first network interface that is up, loopback aside (``eth0`` here): UCX's
    tcp cannot use ``lo`` between two ranks (the wheel's UCX finds no route), so
    MPICH's network path and pmca's tcp meet there instead."""
    for entry in sorted(Path("/sys/class/net").glob("*")):
        state = entry / "operstate"
        if entry.name != "lo" and state.exists() and state.read_text().strip() == "up":
            return entry.name
    return "lo"


_OB1_TCP_LO = {"pml": "ob1", "btl": "self,tcp", "btl_tcp_if_include": "lo"}
_NETWORK = _network_interface()
#: MPICH's network path between local ranks: no shared memory, UCX on tcp, on
#: the interface pmca then uses.  MPICH polls by default (no yield knob).
_MPICH_NETWORK = {"MPIR_CVAR_NOLOCAL": "1", "UCX_TLS": "tcp,self", "UCX_NET_DEVICES": _NETWORK}

PEERS = {
    "tcp (Open MPI)": Peer("Open MPI ob1 tcp on lo", "tcp", "Open MPI", mca=_OB1_TCP_LO),
    "sm (Open MPI)": Peer(
        "Open MPI ob1 sm, single copy smsc/cma",
        "sm",
        "Open MPI",
        mca={"pml": "ob1", "btl": "self,sm", "smsc": "cma"},
    ),
    "tcp (MPICH)": Peer(
        f"MPICH ucx tcp on {_NETWORK} (NOLOCAL)",
        "tcp",
        "MPICH",
        env=_MPICH_NETWORK,
        interface=_NETWORK,
    ),
    "sm (MPICH)": Peer("MPICH default (shared memory)", "sm", "MPICH"),
}


def pmca_config(peer: Peer) -> dict[str, str]:
    """pmca's btls against ``peer``: its tcp on the peer's interface."""
    if peer.transport == "tcp":
        return {"btl": "self,tcp", "btl_tcp_if_include": peer.interface}
    return {"btl": "self,sm"}


# -- inside the job ------------------------------------------------------------------


def _buffers(kind: str, size: int) -> tuple[Any, Any]:
    """The bytes to send (the same on both ranks: seeded by size) and a buffer to receive."""
    import numpy

    data = numpy.random.default_rng(size).integers(0, 256, size, dtype=numpy.uint8)
    if kind == "numpy":
        return data, numpy.zeros(size, dtype=numpy.uint8)
    return bytearray(data.tobytes()), bytearray(size)


def _iterations(size: int, budget: int) -> int:
    return max(3, min(2000, budget // size // 2))


def role(args: dict[str, Any]) -> None:
    """Rank roles: ``sizes`` x ``buffers`` ping-pongs, pmca and mpi4py alternating."""
    from mpi4py import MPI

    import pmca

    comm = MPI.COMM_WORLD
    rank, peer = comm.Get_rank(), 1 - comm.Get_rank()
    with pmca.Session(mca=args["pmca"], world=pmca.world.from_mpi(comm)) as s:
        p2p = s.p2p
        # What each side's user writes: the buffer itself, the type from its format.
        sides = {
            "pmca": (lambda b: p2p.send(peer, 1, b), lambda b: p2p.recv(peer, 1, b)),
            "mpi4py": (
                lambda b: comm.Send(b, dest=peer, tag=1),
                lambda b: comm.Recv(b, source=peer, tag=1),
            ),
        }
        wrong = {side: 0 for side in sides}
        tables: dict[str, dict[str, dict[str, list[float]]]] = {}
        for kind in args["buffers"]:
            tables[kind] = {}
            for size in args["sizes"]:
                data, into = _buffers(kind, size)
                n = _iterations(size, args["budget"])

                def sample(side: str, data: Any = data, into: Any = into, n: int = n) -> float:
                    send, recv = sides[side]
                    into[:] = bytes(len(into)) if isinstance(into, bytearray) else 0
                    comm.Barrier()
                    seconds = common.pingpong(rank, send, recv, data, into, n, blocks=1)
                    wrong[side] += int(bytes(memoryview(into)) != bytes(memoryview(data)))
                    return seconds

                samples = common.interleave(
                    {side: lambda side=side: sample(side) for side in sides},
                    repeats=args["rounds"],
                    warmup=1,
                )
                tables[kind][str(size)] = samples
        reach = s.reach(peer)
        comm.Barrier()
    ranks = comm.gather(wrong, root=0)
    if rank == 0:
        counts = {side: sum(mine[side] for mine in ranks) for side in wrong}
        common.child_reply({"tables": tables, "wrong": counts, "reach": reach})


# -- the floor ---------------------------------------------------------------------


def _floor_program() -> Path | None:
    """``benchmarks/.work/floor``, built from ``floor.c`` when missing or older."""
    source, program = BENCH_DIR / "floor.c", WORK / "floor"
    if program.exists() and program.stat().st_mtime >= source.stat().st_mtime:
        return program
    gcc = shutil.which("gcc")
    if gcc is None:
        return None
    WORK.mkdir(exist_ok=True)
    subprocess.run([gcc, "-O2", "-o", str(program), str(source)], check=True)
    return program


def floors(transport: str, sizes: Sequence[int], quick: bool) -> dict[str, dict[int, float]]:
    """Seconds per size: the C ping-pong's half round trip over ``transport`` and one memcpy.

    Empty when gcc is missing (the tables then print ``-``).
    """
    program = _floor_program()
    if program is None:
        return {}
    budget = str(QUICK_BUDGET if quick else BUDGET)
    found = {}
    for name, mode in (("floor", "tcp" if transport == "tcp" else "shm"), ("memcpy", "memcpy")):
        done = subprocess.run(
            [str(program), mode, budget, *map(str, sizes)],
            capture_output=True,
            text=True,
            check=True,
            timeout=600,
        )
        found[name] = {
            int(s): float(t) for s, t in (line.split() for line in done.stdout.splitlines())
        }
    return found


# -- the parent --------------------------------------------------------------------


def mpich_python() -> Path | None:
    """The MPICH environment's interpreter with this working tree's pmca (pip, PyPI)."""
    python = MPICH_VENV / "bin" / "python"
    install = [str(python), "-m", "pip", "install", "--quiet"]
    steps = [[*install, "numpy"], [*install, "--force-reinstall", "--no-deps", str(ROOT)]]
    if not (MPICH_VENV / "bin" / "mpiexec").exists():
        print(f"creating {MPICH_VENV} (mpich, mpi4py, numpy)", flush=True)
        venv.create(MPICH_VENV, with_pip=True)
        steps = [[*install, "mpich", "mpi4py", "numpy", str(ROOT)]]
    for step in steps:
        done = subprocess.run(step, capture_output=True, text=True, check=False)
        if done.returncode != 0:
            print(done.stdout[-2000:] + done.stderr[-2000:])
            return None
    return python


def _launcher(peer: Peer) -> tuple[common.MpiLauncher, str] | None:
    if peer.mpi == "Open MPI":
        launcher = common.open_mpi()
        return None if launcher is None else (launcher, sys.executable)
    python = mpich_python()
    if python is None:
        return None
    return common.MpiLauncher(str(python.parent / "mpiexec")), str(python)


def compare(
    report: common.Report,
    name: str,
    script: Path,
    *,
    quick: bool,
    sizes: Sequence[int] | None = None,
) -> None:
    """Run ``PEERS[name]``'s job under each polling mode; print the tables, judge the goals.

    ``script`` serves the ``yardstick`` child role with :func:`role`;
    ``sizes`` (``--sizes``) replaces :data:`SIZES` (8 B is always measured).
    """
    peer = PEERS[name]
    found = _launcher(peer)
    if found is None:
        report.notes.append(f"{name} same-job comparison skipped: {peer.mpi} not available")
        return
    launcher, python = found
    default = SIZES[:3] + SIZES[-1:] if quick else SIZES
    sizes = sorted({8, *sizes}) if sizes else default
    floor = floors(peer.transport, sizes, quick)
    modes = ["busy-polling"] if peer.mpi == "MPICH" else list(POLLING)
    for mode in modes:
        polling = POLLING[mode]
        mca = {**peer.mca, **(polling["ompi"] if peer.mpi == "Open MPI" else {})}
        args = {
            "pmca": {**pmca_config(peer), **polling["pmca"]},
            "sizes": sizes,
            "buffers": ["numpy", "bytearray"],
            "rounds": 2 if quick else 8,
            "budget": QUICK_BUDGET if quick else BUDGET,
        }
        result = launcher.run(
            script, "yardstick", args, mca=mca, python=python, env=peer.env, keep_pythonpath=False
        )
        for kind, table in result["tables"].items():
            label = f"{name}, both {mode}, {kind}"
            print(f"\n[{label}] same job, ABBA, {args['rounds']} rounds; peer: {peer.label}")
            print(f"  pmca reaches the peer through {result['reach']}")
            judged = mode == "busy-polling" and kind == "numpy"
            _print_table(table, floor, peer.transport)
            small = GOAL_SM_SMALL_RATIO if peer.transport == "sm" else GOAL_RATIO
            ratios, judged_goals = goals.same_job_goals(
                label, table, limit=GOAL_RATIO, small=(8, small)
            )
            report.ratios.update(ratios)
            if judged:
                report.goals.extend(judged_goals)
            report.figure(
                f"same job: {label}",
                {
                    side: {int(size): [t * 1e6 for t in table[size][side]] for size in table}
                    for side in ("pmca", "mpi4py")
                },
                unit="µs",
                baseline="mpi4py",
                x_label="message size (B)",
                log_x=True,
                log_y=True,
            )
        report.goals.append(goals.wrong_bytes_goal(f"{name}, both {mode}", result["wrong"]))


def _print_table(
    table: Mapping[str, Mapping[str, Sequence[float]]],
    floor: Mapping[str, Mapping[int, float]],
    transport: str,
) -> None:
    floor_name = "C tcp lo" if transport == "tcp" else "C shm ring"
    print(
        f"  {'size':>9} {'pmca us':>10} {'mpi4py us':>10} {'pmca/mpi4py':>12} "
        f"{floor_name + ' us':>14} {'memcpy us':>10} {'memcpy GB/s':>12}"
    )

    def us(seconds: float | None) -> str:
        if seconds is None:
            return "-"
        return f"{seconds * 1e6:.3f}" if seconds < 1e-5 else f"{seconds * 1e6:.1f}"

    for key, sides in table.items():
        size = int(key)
        copy = floor.get("memcpy", {}).get(size)
        ratio = common.paired_ratio(sides["pmca"], sides["mpi4py"])
        print(
            f"  {size:>9} {us(statistics.median(sides['pmca'])):>10} "
            f"{us(statistics.median(sides['mpi4py'])):>10} {ratio:>12.2f} "
            f"{us(floor.get('floor', {}).get(size)):>14} {us(copy):>10} "
            f"{'-' if not copy else f'{size / copy / 1e9:.2f}':>12}"
        )
