"""tcp across simulated hosts: two rails against one, and pmca against Open MPI's tcp.

Needs root (the testbed is made of network namespaces); skipped, saying so,
otherwise. The testbed: 2 hosts, 2 networks, every link limited to
500 Mbit/s both ways with ``tc tbf``; ``mpirun`` runs on the first host and
starts its daemon on the second through the testbed's ssh stand-in; one rank
per host.

- **Rails** (ABBA rounds, 64 MiB messages, time of one send + 1-byte reply):
  pmca with both networks (``btl = self,tcp``: a module per interface, the
  bml stripes by bandwidth) against pmca with ``btl_tcp_if_include=net0``.
  Goal: one rail's time / both rails' time >= 1.8 (paired per round).
- **Open MPI** (ABBA): mpi4py ``Send``/``Recv`` with ``--mca pml ob1 --mca btl
  self,tcp`` against pmca ``self,tcp``, both on both rails, both with
  ``mpi_yield_when_idle=1`` (2 cores, 2 ranks plus the testbed's kernel
  work: a rank that spins takes the core its peer's softirqs need). The
  ping-pong is ``bench_btl``'s. Goals: bandwidth >= 0.9x at every size >=
  1 MiB, 8-byte latency <= 1.5x.

Where the time goes: each rail's rate (500 Mbit/s, 62.5 MB/s) is the floor a
large message meets; the report prints achieved rates against it.
"""

from __future__ import annotations

import statistics
import sys
import time
from pathlib import Path
from typing import Any

import _common as common
import _goals as goals
import bench_btl
import bench_btl_sm as sm_bench

RATE = "500mbit"
LINK_MB_S = 500e6 / 8 / 1e6
RAIL_SIZE = 64 << 20
GOAL_RAILS = 1.8
GOAL_LATENCY = 1.5
#: Both stacks yield the core between polls.
YIELD = {"PMCA_MCA_mpi_yield_when_idle": "1", "OMPI_MCA_mpi_yield_when_idle": "1"}


def _role_rails(args: dict[str, Any]) -> None:
    from mpi4py import MPI

    import pmca

    comm = MPI.COMM_WORLD
    rank, peer = comm.Get_rank(), 1 - comm.Get_rank()
    mca = {"btl": "self,tcp", **args.get("mca", {})}
    size, repeats = args["size"], args["repeats"]
    data, out = bytearray(size), bytearray(size)
    with pmca.Session(mca=mca, world=pmca.world.from_mpi(comm)) as s:
        p = s.p2p
        times = []
        for round_ in range(repeats + 1):  # the first touches the pages
            comm.Barrier()
            start = time.perf_counter()
            if rank == 0:
                p.send(peer, 1, data)
                p.recv(peer, 2, bytearray(1))
            else:
                p.recv(peer, 1, out)
                p.send(peer, 2, b"k")
            if round_:
                times.append(time.perf_counter() - start)
        reach = s.reach(peer)
    if rank == 0:
        common.child_reply({"seconds": statistics.median(times), "reach": reach})


def _launcher(testbed: Any, mpirun: str) -> common.MpiLauncher:
    """mpirun, run on the first host, one rank per host through the ssh stand-in."""
    wrapper = testbed.state / "mpirun"
    head = " ".join(testbed.enter_command(testbed.hosts[0]))
    wrapper.write_text(f'#!/bin/sh\nexec {head} {mpirun} "$@"\n')
    wrapper.chmod(0o755)
    options = ("--allow-run-as-root", "--bind-to", "none", *testbed.prrte_args(1))
    return common.MpiLauncher(str(wrapper), options, env=YIELD)


def _rails(report: common.Report, launcher: common.MpiLauncher, rounds: int) -> None:
    jobs = {
        "one rail": {"mca": {"btl_tcp_if_include": "net0"}},
        "two rails": {"mca": {}},
    }
    times: dict[str, list[float]] = {name: [] for name in jobs}
    reach: dict[str, Any] = {}
    names = list(jobs)
    for index in range(rounds):
        order = names if index % 2 == 0 else names[::-1]
        for name in (*order, *reversed(order)):
            args = {"size": RAIL_SIZE, "repeats": 3, **jobs[name]}
            reply = launcher.run(Path(__file__).resolve(), "rails", args, timeout=600)
            times[name].append(reply["seconds"])
            reach[name] = reply["reach"]
    common.heading("rails: a 64 MiB message")
    for name in names:
        seconds = statistics.median(times[name])
        rate = RAIL_SIZE / seconds / 1e6
        print(
            f"  {name}: {seconds:.2f} s, {rate:.1f} MB/s ({rate / LINK_MB_S:.2f}x one link's "
            f"{LINK_MB_S:.1f} MB/s); reach {reach[name]}"
        )
    goal = goals.rails_goal(
        "two rails vs one, 64 MiB", times["one rail"], times["two rails"], GOAL_RAILS
    )
    report.ratios["rails: one rail / two rails (64 MiB time)"] = goal.value
    report.goals.append(goal)


def _against_open_mpi(report: common.Report, launcher: common.MpiLauncher, quick: bool) -> None:
    tcp = {"pml": "ob1", "btl": "self,tcp", "btl_tcp_if_include": "198.18.0.0/15"}
    python = sys.executable
    flags = {"quick": quick}
    runs: dict[str, list[dict[str, Any]]] = {"mpi4py": [], "pmca": []}
    jobs = {
        "mpi4py": {**flags, "role": "mpi4py"},
        "pmca": {**flags, "role": "pmca", "btl": "self,tcp"},
    }
    for index in range(1 if quick else 2):
        order = ["mpi4py", "pmca"] if index % 2 == 0 else ["pmca", "mpi4py"]
        for name in (*order, *reversed(order)):
            runs[name].append(
                launcher.run(
                    Path(bench_btl.__file__).resolve(),
                    name,
                    jobs[name],
                    mca=tcp,
                    python=python,
                    keep_pythonpath=False,
                    timeout=900,
                )
            )
    label = "tcp across hosts (Open MPI)"
    ratios, judged = goals.pingpong_goals(
        label,
        runs["pmca"],
        runs["mpi4py"],
        latency_limit=GOAL_LATENCY,
        bandwidth_limit=sm_bench.GOAL_INVERSE_BANDWIDTH,
        big=sm_bench.BIG,
    )
    latency = statistics.median(r["latency_us"] for r in runs["pmca"])
    base = statistics.median(r["latency_us"] for r in runs["mpi4py"])
    print(f"\n[{label}] reach {runs['pmca'][0].get('reach')}")
    print(f"8-byte half round trip: pmca {latency:.1f} us, Open MPI {base:.1f} us")
    layer = [r["layers_us"]["btl"] for r in runs["pmca"] if "btl" in r.get("layers_us", {})]
    if layer:
        # Where the time goes: the same ping-pong one layer down, no p2p on top.
        print(f"  the tcp module alone (sendi + progress): {statistics.median(layer):.1f} us")
    common.print_bandwidths(runs["pmca"], runs["mpi4py"], ratios, label)
    print(f"  (two links of {LINK_MB_S:.1f} MB/s each: {2 * LINK_MB_S:.0f} MB/s in all)")
    report.ratios.update(ratios)
    report.goals.extend(judged)


def main() -> None:
    args = common.parser(__doc__ or "").parse_args()
    roles = {"rails": _role_rails, "mpi4py": bench_btl._role_mpi4py, "pmca": bench_btl._role_pmca}
    if common.serve_child(args, roles):
        return
    report = common.Report("cluster")
    from pmca.testing import Testbed, testbed_requirements

    why = testbed_requirements()
    mpirun = common.find_mpirun()
    if why is not None or mpirun is None:
        report.notes.append(f"skipped: {why or 'no Open MPI mpirun'}")
        report.emit()
        return
    with Testbed(2, networks=2, rate=RATE) as testbed:
        launcher = _launcher(testbed, mpirun)
        _rails(report, launcher, 1 if args.quick else 2)
        _against_open_mpi(report, launcher, args.quick)
    report.notes.append(f"2 hosts x 1 rank, 2 networks, every link {RATE} (tc tbf)")
    report.notes.append("mpi_yield_when_idle=1 for both stacks (2 cores)")
    report.emit()


if __name__ == "__main__":
    main()
