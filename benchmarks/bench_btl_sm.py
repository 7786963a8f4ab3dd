"""Shared-memory ping-pong: pmca's btl/sm against mpi4py, same job, each peer at its best.

Judged (``_yardstick.py``, as ``bench_btl.py`` does for tcp): pmca
(``btl = self,sm``) against mpi4py on Open MPI ob1 ``btl self,sm`` with its
single copy (``smsc cma``) and on MPICH's default path, in one job, 8 B to
64 MiB, the floor (a C shared-memory ring, one core's memcpy) beside each
row. Goal: <= 1.10x mpi4py (8 B: <= 1.3x), numpy buffers, busy polling.

The old baseline follows, reported and not judged: separate ``mpirun -n 2
--mca pml ob1 --mca btl self,sm`` jobs, mpi4py against pmca on bytearrays.
Jobs alternate in ABBA order; each reports the median half round trip of
8-byte messages (latency) and, for 1 KiB ... 64 MiB, the bandwidth of a
ping-pong (bytes / half round trip).  The pmca job also measures the same
8-byte ping-pong through each layer, to say where the time goes: the
native transport alone (one ctypes call each way, no match header), an sm
lane alone (the native calls a blocking p2p send/recv makes: match header
written and checked in C), the btl module (``sendi`` + ``progress`` with
an active-message callback), p2p's general path (``isend``/``irecv`` +
``wait``: what a blocking send/recv costs where no lane applies), and the
p2p ``send``/``recv`` measured above (through the lane). Both sides also
report what one 8-byte send and one receive of a message already there
cost when nobody waits for the other: each side's own cost, which a loaded
machine disturbs far less than a ping-pong, whose ranks must both be
running at once.

Mid-size messages (4 KiB ... 256 KiB), where the message layer's own work
weighs most: the pmca job also times each of those ping-pongs through an
sm lane's native calls alone (eager: send + receive; rendezvous: header,
CMA read and FIN) and one CMA read of that size, so that p2p minus lane is
the Python message layer's share and lane minus CMA the protocol's.
``--profile`` runs each size once more under cProfile on both ranks and
prints where their Python time goes (the timed runs are not profiled).

``--before PYTHON`` adds a third side to every round: the same pmca job run
by another interpreter, whose installed pmca is the one to compare with (the
main branch, a release); pmca's 8-byte latency and >= 1 MiB bandwidth must
then be no worse than it (paired, within 10 %), and every size's ratio to
it is printed. ``--sizes 4K,64K,1M`` measures only those sizes.
Skipped, with a note, when mpirun or mpi4py is not installed.
"""

from __future__ import annotations

import cProfile
import os
import pstats
import statistics
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import _common as common
import _goals as goals
import _sm_layers as sm_layers
import _yardstick as yardstick
from _sm_layers import LATENCY_BYTES

#: 1 KiB, 4 KiB, ... 64 MiB, and every power of two from 4 KiB to 256 KiB.
SIZES = sorted({1 << k for k in range(10, 27, 2)} | {1 << k for k in range(12, 19)})
#: What bench_cluster.py asks of bandwidth (>= 0.9x its baseline for sizes >= BIG).
GOAL_INVERSE_BANDWIDTH = 1 / 0.9
BIG = 1 << 20
#: pmca against the pmca of ``--before``: 8 B latency and >= 1 MiB no more than 10 % worse.
GOAL_NO_WORSE = 1.10
PROFILE_LINES = 14
#: The label of the old comparison's rows (reported, not judged).
OLD_BASELINE = "sm (old baseline: separate jobs, bytearrays)"


# -- inside mpirun -------------------------------------------------------------------


#: Also what bench_btl.py measures with.
_pingpong = common.pingpong


def _per_call(rank: int, send: Any, recv: Any, barrier: Any, quick: bool) -> dict[str, float]:
    """Microseconds one 8-byte send and one receive of a message already there take.

    Rank 1 sends a burst, then rank 0 receives it: nobody waits for the
    other, so the numbers are each side's own cost (steady on a loaded
    machine, unlike a ping-pong's). The 10th percentile of the bursts.
    """
    burst, rounds = 40, 20 if quick else 60
    data, into = bytearray(LATENCY_BYTES), bytearray(LATENCY_BYTES)
    sends, receives = [], []

    def per_call(operation: Any, buf: bytearray) -> float:
        start = time.perf_counter()
        for _ in range(burst):
            operation(buf)
        return (time.perf_counter() - start) / burst

    for _ in range(rounds):
        barrier()
        if rank == 1:
            sends.append(per_call(send, data))
        barrier()
        if rank == 0:
            receives.append(per_call(recv, into))
    barrier()
    mine = sorted(sends or receives)[rounds // 10] * 1e6
    return {"send_us" if rank == 1 else "recv_us": mine}


def _measure(
    rank: int,
    send: Any,
    recv: Any,
    quick: bool,
    barrier: Any,
    wild_recv: Any = None,
    sizes: Sequence[int] = SIZES,
    profile: bool = False,
) -> dict[str, Any]:
    small = bytearray(LATENCY_BYTES)
    latency = _pingpong(rank, send, recv, small, bytearray(LATENCY_BYTES), 300 if quick else 1000)
    wild = None
    if wild_recv is not None:
        # the same ping-pong, every receive from ANY_SOURCE with ANY_TAG
        wild = _pingpong(
            rank, send, wild_recv, small, bytearray(LATENCY_BYTES), 300 if quick else 1000
        )
    per_call = _per_call(rank, send, recv, barrier, quick)
    bandwidth, profiles = {}, {}
    for size in sizes:
        data, into = bytearray(os.urandom(size)), bytearray(size)
        _pingpong(rank, send, recv, data, into, 1, blocks=1)  # first touch of the pages
        n = sm_layers.iterations(size, quick) // 5 or 1
        half = _pingpong(rank, send, recv, data, into, n)
        bandwidth[str(size)] = size / half / 1e6  # MB/s
        if profile:  # once more, profiled: the timed run above is not
            profiler = cProfile.Profile()
            profiler.enable()
            _pingpong(rank, send, recv, data, into, n, blocks=1)
            profiler.disable()
            profiles[str(size)] = _profile_lines(profiler, n)
    result = {
        "latency_us": latency * 1e6,
        "wild_latency_us": None if wild is None else wild * 1e6,
        "bandwidth": bandwidth,
        "per_call": per_call,
    }
    if profile:
        result["profile"] = profiles
    return result


def _profile_lines(profiler: cProfile.Profile, exchanges: int) -> list[str]:
    """The functions that took most of a profiled ping-pong, per exchange (send + recv)."""
    stats = pstats.Stats(profiler)
    rows = []
    for (path, line, name), (_, calls, own, total, _) in stats.stats.items():  # type: ignore[attr-defined]
        where = f"{Path(path).parent.name}/{Path(path).name}:{line}({name})" if line else name
        rows.append((own, total, calls, where))
    rows.sort(reverse=True)
    everything = sum(row[0] for row in rows) or 1.0
    in_all = everything / exchanges * 1e6
    lines = [f"{'own us':>8} {'total us':>9} {'calls':>6}  per exchange ({in_all:.1f} us in all)"]
    for own, total, calls, where in rows[:PROFILE_LINES]:
        lines.append(
            f"{own / exchanges * 1e6:8.2f} {total / exchanges * 1e6:9.2f} "
            f"{calls / exchanges:6.1f}  {where}"
        )
    return lines


def _gather_per_call(comm: Any, result: dict[str, Any]) -> None:
    """Rank 0 reports both ranks' per-call costs (the sender's is rank 1's)."""
    for part in comm.allgather(result["per_call"]):
        result["per_call"] = {**result["per_call"], **part}


def _gather_profiles(comm: Any, result: dict[str, Any]) -> None:
    """Rank 0 reports both ranks' profiles (``--profile``), as ``{size: {rank: lines}}``."""
    if "profile" not in result:
        return
    ranks = comm.gather(result["profile"], root=0)
    if ranks is not None:
        sizes = ranks[0]
        result["profile"] = {
            size: {str(rank): mine[size] for rank, mine in enumerate(ranks)} for size in sizes
        }


def _role_mpi4py(args: dict[str, Any]) -> None:
    from mpi4py import MPI

    comm = MPI.COMM_WORLD
    rank, peer = comm.Get_rank(), 1 - comm.Get_rank()

    def send(buf: bytearray) -> None:
        comm.Send([buf, MPI.BYTE], dest=peer, tag=1)

    def recv(buf: bytearray) -> None:
        comm.Recv([buf, MPI.BYTE], source=peer, tag=1)

    def wild_recv(buf: bytearray) -> None:
        comm.Recv([buf, MPI.BYTE], source=MPI.ANY_SOURCE, tag=MPI.ANY_TAG)

    result = _measure(
        rank, send, recv, args["quick"], comm.Barrier, wild_recv, args.get("sizes") or SIZES
    )
    _gather_per_call(comm, result)
    if rank == 0:
        common.child_reply(result)


def _role_pmca(args: dict[str, Any]) -> None:
    from mpi4py import MPI

    import pmca

    comm = MPI.COMM_WORLD
    rank, peer = comm.Get_rank(), 1 - comm.Get_rank()
    with pmca.Session(mca={"btl": "self,sm"}, world=pmca.world.from_mpi(comm)) as s:
        if s.reach(peer) != ["sm"]:
            raise SystemExit(f"rank {peer} is reached through {s.reach(peer)}, not sm")
        p2p = s.p2p

        def send(buf: bytearray) -> None:
            p2p.send(peer, tag=1, buf=buf)

        def recv(buf: bytearray) -> None:
            p2p.recv(peer, tag=1, buf=buf)

        def wild_recv(buf: bytearray) -> None:
            p2p.recv(pmca.ANY_SOURCE, pmca.ANY_TAG, buf)

        sizes, quick = args.get("sizes") or SIZES, args["quick"]
        result = _measure(
            rank, send, recv, quick, comm.Barrier, wild_recv, sizes, args.get("profile", False)
        )
        _gather_per_call(comm, result)
        _gather_profiles(comm, result)
        try:
            result["layers_us"] = sm_layers.layers(rank, s, quick, comm.Barrier)
        except Exception as exc:  # the layer breakdown is informative only
            result["layers_us"] = {"error": repr(exc)}
        comm.Barrier()
        try:
            result["mid_layers"] = sm_layers.mid_layers(rank, s, sizes, quick, comm.Barrier)
        except Exception as exc:  # informative only (a pmca without rendezvous lanes)
            result["mid_layers"] = {"error": repr(exc)}
        comm.Barrier()
    if rank == 0:
        result["pmca"] = str(Path(pmca.__file__).parent)
        common.child_reply(result)


# -- the parent ------------------------------------------------------------------------


def parser(description: str = __doc__ or "") -> Any:
    """The common options, and this benchmark's (``bench_btl.py`` shares them, with
    its own ``description``)."""
    result = common.parser(description)
    result.add_argument(
        "--sizes",
        type=_size_list,
        default=None,
        help="only these message sizes, e.g. 4K,64K,1M (8-byte latency is always measured)",
    )
    result.add_argument(
        "--before",
        metavar="PYTHON",
        help="an interpreter with another pmca installed: its job is a third side of each round",
    )
    result.add_argument(
        "--profile", action="store_true", help="profile each size's ping-pong on both pmca ranks"
    )
    result.add_argument("--no-mpich", action="store_true", help="no MPICH comparison")
    return result


def _size_list(text: str) -> list[int]:
    units = {"K": 1 << 10, "M": 1 << 20}
    sizes = []
    for item in text.split(","):
        item = item.strip().upper().removesuffix("B").removesuffix("I")
        scale = units.get(item[-1:], 1)
        sizes.append(int(item.rstrip("KM")) * scale)
    return sorted(set(sizes))


def run_rounds(jobs: dict[str, Any], rounds: int, run: Any) -> dict[str, list[dict[str, Any]]]:
    """``run(jobs[side])`` for every side, ``rounds`` times, in ABBA order (ABC CBA)."""
    runs: dict[str, list[dict[str, Any]]] = {name: [] for name in jobs}
    names = list(jobs)
    for index in range(rounds):
        order = names if index % 2 == 0 else names[::-1]
        for name in (*order, *reversed(order)):
            runs[name].append(run(jobs[name]))
    return runs


def print_profiles(subject: Sequence[dict[str, Any]], label: str) -> None:
    """``--profile``: each size's profile of both ranks (the first job's)."""
    profiles = next((run["profile"] for run in subject if run.get("profile")), {})
    for size, ranks in profiles.items():
        for rank, lines in ranks.items():
            print(f"\n[{label}] profile of a {size}-byte ping-pong, rank {rank}:")
            for line in lines:
                print("  " + line)


def before_goals(
    label: str, subject: Sequence[dict[str, Any]], before: Sequence[dict[str, Any]]
) -> tuple[dict[str, float], list[common.Goal]]:
    """pmca against the pmca of ``--before``: no worse at 8 B and >= 1 MiB; every ratio."""
    ratios, judged = goals.pingpong_goals(
        f"{label}, pmca against before",
        subject,
        before,
        latency_limit=GOAL_NO_WORSE,
        bandwidth_limit=GOAL_NO_WORSE,
        big=BIG,
    )
    print(f"\n[{label}] pmca against the pmca of --before (paired; time ratios, < 1: faster now):")
    for name, value in ratios.items():
        print(f"  {name}: {value:.2f}")
    return ratios, judged


def main() -> None:
    args = parser().parse_args()
    roles = {"mpi4py": _role_mpi4py, "pmca": _role_pmca, "yardstick": yardstick.role}
    if common.serve_child(args, roles):
        return
    report = common.Report("btl_sm")
    for name in ["sm (Open MPI)"] + ([] if args.no_mpich else ["sm (MPICH)"]):
        yardstick.compare(
            report, name, Path(__file__).resolve(), quick=args.quick, sizes=args.sizes
        )
    common.heading(f"{OLD_BASELINE}, with the layer breakdown")
    launcher = common.open_mpi_or_skip(report, part="old baseline")
    if launcher is None:
        report.emit()
        return
    rounds = 1 if args.quick else 2
    child = {"quick": args.quick, "sizes": args.sizes, "profile": args.profile}
    jobs = {"mpi4py": ("mpi4py", sys.executable), "pmca": ("pmca", sys.executable)}
    if args.before:
        jobs["before"] = ("pmca", args.before)

    def run(job: tuple[str, str]) -> dict[str, Any]:
        role, python = job
        return launcher.run(
            Path(__file__).resolve(),
            role,
            {**child, "profile": args.profile and python == sys.executable and role == "pmca"},
            mca={"pml": "ob1", "btl": "self,sm"},
            python=python,
            keep_pythonpath=python == sys.executable,
        )

    runs = run_rounds(jobs, rounds, run)
    pmca_where = runs["pmca"][0].get("pmca", "?")
    print(f"pmca from {pmca_where}; {len(runs['pmca'])} jobs per side, ABBA order")
    if args.before:
        print(f"--before: pmca from {runs['before'][0].get('pmca', '?')}")

    def median(role: str, pick: Any) -> float:
        return statistics.median(pick(run) for run in runs[role])

    base_latency = median("mpi4py", lambda r: r["latency_us"])
    latency = median("pmca", lambda r: r["latency_us"])
    print(f"\n8-byte half round trip: pmca {latency:.2f} us, mpi4py {base_latency:.2f} us")
    layers = runs["pmca"][0].get("layers_us", {})
    print("  where the time goes (the same ping-pong through each layer alone):")
    for name, what in (
        ("native", "native transport (send + poll)"),
        ("lane", "sm lane (native match send + receive)"),
        ("btl", "btl module (sendi + progress + callback)"),
        ("requests", "p2p isend/irecv + wait (no lane)"),
    ):
        values = [run["layers_us"][name] for run in runs["pmca"] if name in run["layers_us"]]
        if values:
            print(f"    {what:<42} {statistics.median(values):6.2f} us")
    print(f"    {'p2p send/recv (through the lane)':<42} {latency:6.2f} us")
    wild = goals.run_ratio(runs["pmca"], runs["mpi4py"], lambda r: r["wild_latency_us"])
    print(
        f"  with ANY_SOURCE/ANY_TAG receives: pmca "
        f"{median('pmca', lambda r: r['wild_latency_us']):.2f} us, mpi4py "
        f"{median('mpi4py', lambda r: r['wild_latency_us']):.2f} us (paired ratio {wild:.2f})"
    )
    report.ratios["sm latency 8 B, ANY_SOURCE/ANY_TAG receives (pmca / mpi4py)"] = wild
    for role in ("pmca", "mpi4py"):
        send_us = median(role, lambda r: r["per_call"]["send_us"])
        recv_us = median(role, lambda r: r["per_call"]["recv_us"])
        print(
            f"  {role} per call, nobody waiting: send {send_us:.2f} us, "
            f"recv of a waiting message {recv_us:.2f} us"
        )
    report.ratios["sm send + recv cost 8 B, nobody waiting (pmca / mpi4py)"] = goals.run_ratio(
        runs["pmca"], runs["mpi4py"], lambda r: r["per_call"]["send_us"] + r["per_call"]["recv_us"]
    )
    for name, what in (("cma_MBps", "one CMA read"), ("memmove_MBps", "one local memmove")):
        values = [run["layers_us"][name] for run in runs["pmca"] if name in run["layers_us"]]
        if values:
            print(f"  64 MiB by {what}: {statistics.median(values):.0f} MB/s")
    if "error" in layers:
        report.notes.append(f"layer breakdown failed: {layers['error']}")
    ratios, _ = goals.pingpong_goals(
        OLD_BASELINE, runs["pmca"], runs["mpi4py"], latency_limit=None, bandwidth_limit=None, big=0
    )
    report.size_figures(f"btl {OLD_BASELINE}", runs, baseline="mpi4py")
    common.print_bandwidths(runs["pmca"], runs["mpi4py"], ratios, OLD_BASELINE)
    sm_layers.print_mid_layers(runs["pmca"], runs["mpi4py"])
    print_profiles(runs["pmca"], "sm")
    report.ratios.update(ratios)
    if args.before:
        ratios, judged = before_goals("sm", runs["pmca"], runs["before"])
        report.ratios.update(ratios)
        report.goals.extend(judged)
    report.emit()


if __name__ == "__main__":
    main()
