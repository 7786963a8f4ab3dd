"""The sm ping-pong's layer breakdown: each layer of pmca's 8-byte path alone,
and mid-size messages through an sm lane's native calls alone.

Run inside the pmca job of ``bench_btl_sm.py``, after its timed ping-pongs;
informative only (nothing here is judged).
"""

from __future__ import annotations

import ctypes
import os
import statistics
import time
from collections.abc import Sequence
from typing import Any

import _common as common

#: The 8-byte message of every latency row.
LATENCY_BYTES = 8
#: The size of the CMA read and the memmove measured beside the layers (64 MiB).
COPY_BYTES = 1 << 26
#: Mid-size messages, where the layer breakdown times an sm lane alone.
MID = (4 << 10, 256 << 10)


def iterations(size: int, quick: bool) -> int:
    """Ping-pongs of ``size`` bytes per measurement: 64 MiB each way (quick: 32), 3 to 2000."""
    budget = (64 if quick else 128) << 20
    return max(3, min(2000, budget // max(size, 1) // 2))


def layers(rank: int, s: Any, quick: bool, barrier: Any) -> dict[str, float]:
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
    layers = {
        "native": common.pingpong(rank, native_send, native_recv, bytearray(), bytearray(), n)
    }
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

    layers["btl"] = common.pingpong(rank, btl_send, btl_recv, bytearray(), bytearray(), n)
    barrier()
    sm.unregister_recv(TAG_USER)
    layers["lane"] = lane_pingpong(rank, sm.open_lane(endpoint, TAG_USER), n)
    barrier()
    p2p = s.p2p

    def request_send(buf: bytearray) -> None:
        p2p.isend(peer, 2, buf).wait()

    def request_recv(buf: bytearray) -> None:
        p2p.irecv(peer, 2, buf).wait()

    small = bytearray(LATENCY_BYTES)
    layers["requests"] = common.pingpong(rank, request_send, request_recv, small, small, n)
    barrier()
    result = {name: seconds * 1e6 for name, seconds in layers.items()}
    result.update(copies(rank, s, transport, sm.endpoint(peer).pid))
    return result


def lane_pingpong(rank: int, lane: Any, n: int) -> float:
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

    return common.pingpong(rank, lane_send, lane_recv, bytearray(), bytearray(), n)


def copies(rank: int, s: Any, transport: Any, peer_pid: int) -> dict[str, float]:
    """MB/s of one 64 MiB CMA read from the peer and of one local memmove."""
    from pmca.btl.sm._transport import buffer_address

    peer = 1 - rank
    size = COPY_BYTES
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


def mid_layers(rank: int, s: Any, sizes: Sequence[int], quick: bool, barrier: Any) -> dict:
    """Each mid size's half round trip (us) through an sm lane's native calls alone
    (``lane_us``), and one CMA read of that size (``cma_us``, rank 0's)."""
    from pmca.btl import TAG_USER
    from pmca.btl.sm._transport import buffer_address

    sm = next(module for module in s.modules("btl") if module.name == "sm")
    peer = 1 - rank
    lane = sm.open_lane(sm.endpoint(peer), TAG_USER)
    lanes: dict[str, float] = {}
    reads: dict[str, float] = {}
    for size in [size for size in sizes if MID[0] <= size <= MID[1]]:
        data, into = bytes(os.urandom(size)), bytearray(size)
        address, _, keep = buffer_address(data)
        target, _, keep_into = buffer_address(into)
        key = lane.reserve() if size > lane.payload_limit else None
        if key is not None:
            lane.mark(key, address, size)
        send, recv = lane_exchange(lane, data, target, key)
        barrier()
        n = iterations(size, quick) // 5 or 1
        lanes[str(size)] = common.pingpong(rank, send, recv, into, into, n) * 1e6
        if key is not None:
            lane.deregister(key)
        theirs = bytearray(8)
        request = s.p2p.irecv(peer, 5, theirs)
        s.p2p.send(peer, 5, address.to_bytes(8, "little"))
        request.wait()
        if rank == 0:
            remote, pid = int.from_bytes(theirs, "little"), sm.endpoint(peer).pid
            times = []
            for _ in range(n):
                start = time.perf_counter()
                sm.transport.cma(pid, write=False, local=target, remote=remote, length=size)
                times.append(time.perf_counter() - start)
            reads[str(size)] = statistics.median(times) * 1e6
        barrier()
        del keep, keep_into
    return {"lane_us": lanes, "cma_us": reads}


def lane_exchange(lane: Any, data: bytes, target: int, key: int | None) -> tuple[Any, Any]:
    """A lane's send and receive of ``data`` alone: eager, or (registration ``key``) a
    rendezvous: header, the receiver's CMA read and FIN. Their own sequence numbers."""
    size = len(data)
    counts = [0, 0]  # messages sent, received
    body = ctypes.py_object(data)

    def send(_: bytearray) -> None:
        sequence = counts[0]
        if key is None:
            while lane.send(sequence, 1, 0, data, size) != 0:
                pass
        else:
            while lane.send_rget_buffer(sequence, 1, 0, sequence + 1, 0, key, 0, body) <= 0:
                pass
            while lane.await_fin(sequence + 1) < 2:
                pass
        counts[0] += 1

    def recv(_: bytearray) -> None:
        while lane.receive_into(counts[1], 1, 0, target, size) < 2:
            pass
        if lane.owed_fin():
            raise RuntimeError("the lane could not send its FIN (busy FIFO)")
        counts[1] += 1

    return send, recv


def print_mid_layers(subject: Sequence[dict[str, Any]], baseline: Sequence[dict[str, Any]]) -> None:
    """Mid sizes: p2p's half round trip next to the lane alone, one CMA read and mpi4py's."""
    layers = [run["mid_layers"] for run in subject if "lane_us" in run.get("mid_layers", {})]
    sizes = [int(size) for size in subject[0]["bandwidth"]] if subject else []
    sizes = [size for size in sizes if MID[0] <= size <= MID[1]]
    if not sizes:
        return
    print("\nmid sizes, half round trip (medians over jobs, us):")
    print(f"{'size':>8} {'pmca p2p':>9} {'lane alone':>11} {'CMA read':>9} {'mpi4py':>8}")

    def median_of(values: list[float]) -> str:
        return f"{statistics.median(values):.1f}" if values else "-"

    for size in sizes:
        key = str(size)
        mine = [size / run["bandwidth"][key] for run in subject]
        theirs = [size / run["bandwidth"][key] for run in baseline]
        lane = [layer["lane_us"][key] for layer in layers if key in layer["lane_us"]]
        cma = [layer["cma_us"][key] for layer in layers if key in layer["cma_us"]]
        print(
            f"{size:>8} {median_of(mine):>9} {median_of(lane):>11} {median_of(cma):>9} "
            f"{median_of(theirs):>8}"
        )
    errors = {run["mid_layers"]["error"] for run in subject if "error" in run.get("mid_layers", {})}
    for error in errors:
        print(f"  (lane layers not measured: {error})")
