"""One rank of a multi-process sm test (run by test_session.py, one process each).

Usage: ``_rank.py RANK SIZE SOCKET SCENARIO MCA_JSON``; prints one JSON report.
"""

from __future__ import annotations

import hashlib
import json
import os
import random
import signal
import sys
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[3]))

import contextlib

import pmca
from pmca.btl import PeerFailed
from tests.btl.sm._world import SocketWorld

SIZES = [0, 1, 8, 4095, 4096, 4097, 32767, 32768, 32769, 1 << 20, (4 << 20) + 3, 64 << 20]


def payload(size: int, seed: int) -> bytes:
    return random.Random(seed).randbytes(size)


def sm_state() -> dict[str, int]:
    """How much of sm this process still holds: fds, mappings, the library."""
    fds = 0
    for fd in os.listdir("/proc/self/fd"):
        with contextlib.suppress(OSError):
            fds += "pmca-btl-sm" in os.readlink(f"/proc/self/fd/{fd}")
    maps = Path("/proc/self/maps").read_text().splitlines()
    return {
        "memfds": fds,
        "segments": sum("pmca-btl-sm" in line for line in maps),
        "library": sum("libpmca_btl_sm.so" in line for line in maps),
    }


def refuse_cma() -> None:
    """Make this thread's process_vm_readv/writev fail with EPERM (a seccomp filter).

    As root the kernel never refuses CMA; this is how a test meets the
    refusal a ptrace policy or a container gives other users.
    """
    import ctypes
    import platform

    assert platform.machine() == "x86_64", "the syscall numbers below are x86_64's"

    class Instruction(ctypes.Structure):
        _fields_ = (
            ("code", ctypes.c_uint16),
            ("jt", ctypes.c_uint8),
            ("jf", ctypes.c_uint8),
            ("k", ctypes.c_uint32),
        )

    class Program(ctypes.Structure):
        _fields_ = (("len", ctypes.c_uint16), ("filter", ctypes.POINTER(Instruction)))

    load_nr, jump_eq, ret = 0x20, 0x15, 0x06
    allow, eperm = 0x7FFF0000, 0x00050000 | 1
    code = (Instruction * 5)(
        Instruction(load_nr, 0, 0, 0),
        Instruction(jump_eq, 2, 0, 310),  # process_vm_readv
        Instruction(jump_eq, 1, 0, 311),  # process_vm_writev
        Instruction(ret, 0, 0, allow),
        Instruction(ret, 0, 0, eperm),
    )
    program = Program(5, code)
    libc = ctypes.CDLL(None, use_errno=True)
    libc.prctl.argtypes = [
        ctypes.c_int,
        ctypes.c_ulong,
        ctypes.c_void_p,
        ctypes.c_ulong,
        ctypes.c_ulong,
    ]
    assert libc.prctl(38, 1, None, 0, 0) == 0  # PR_SET_NO_NEW_PRIVS
    assert libc.prctl(22, 2, ctypes.addressof(program), 0, 0) == 0, ctypes.get_errno()


def echo_sizes(s: pmca.Session, rank: int, sizes: list[int]) -> list[int]:
    """Rank 0 sends each size to rank 1, which echoes it; returns sizes that came back wrong."""
    wrong = []
    for index, size in enumerate(sizes):
        if rank == 0:
            data = payload(size, index)
            s.p2p.send(1, tag=index, buf=data, timeout=120)
            back = bytearray(size)
            assert s.p2p.recv(1, tag=index, buf=back, timeout=120) == size
            if hashlib.sha256(back).digest() != hashlib.sha256(data).digest():
                wrong.append(size)
        elif rank == 1:
            into = bytearray(size)
            assert s.p2p.recv(0, tag=index, buf=into, timeout=120) == size
            s.p2p.send(0, tag=index, buf=into, timeout=120)
    return wrong


def ring(s: pmca.Session, rank: int, size: int) -> list[int]:
    wrong = []
    right, left = (rank + 1) % size, (rank - 1) % size
    for index, length in enumerate(SIZES[:-1]):
        into = bytearray(length)
        request = s.p2p.irecv(left, 100 + index, into)
        s.p2p.send(right, tag=100 + index, buf=payload(length, rank * 1000 + index), timeout=120)
        request.wait()
        if bytes(into) != payload(length, left * 1000 + index):
            wrong.append(length)
    return wrong


def rdma(s: pmca.Session, rank: int) -> dict[str, object]:
    """Rank 1 offers a registered buffer; rank 0 puts into it and gets it back."""
    import struct

    from pmca.btl import BtlError

    sm = next(m for m in s.modules("btl") if m.name == "sm")
    size = (1 << 20) + 5
    outcome: dict[str, object] = {}
    if rank == 1:
        memory = bytearray(size)
        view = memoryview(memory)
        from pmca.p2p._buffers import address_of

        handle = sm.register_mem(None, address_of(view), size)
        s.p2p.send(0, tag=7, buf=struct.pack("<Q", handle.base) + handle.packed, timeout=60)
        s.p2p.recv(0, tag=8, buf=bytearray(8), timeout=60)
        outcome["put_landed"] = bytes(memory) == payload(size, 42)
        sm.deregister_mem(handle)
        return outcome
    message = bytearray(8 + 64)
    length = s.p2p.recv(1, tag=7, buf=message, timeout=60)
    (base,) = struct.unpack_from("<Q", message)
    packed = bytes(message[8:length])
    endpoint = sm.endpoint(1)
    results: list[BaseException | None] = []

    def wait() -> BaseException | None:
        while not results:
            s.p2p.progress()
        return results.pop()

    data = payload(size, 42)
    sm.put(endpoint, memoryview(data), None, base, packed, results.append)
    outcome["put"] = repr(wait())
    back = bytearray(size)
    sm.get(endpoint, memoryview(back), None, base, packed, results.append)
    outcome["get"] = repr(wait())
    outcome["get_intact"] = bytes(back) == data
    try:
        sm.get(endpoint, memoryview(bytearray(16)), None, base + size - 8, packed, results.append)
        outcome["outside"] = repr(wait())
    except BtlError as exc:
        outcome["outside"] = repr(exc)
    forged = struct.pack("<QQQ", 999, base, size)
    try:
        sm.get(endpoint, memoryview(bytearray(16)), None, base, forged, results.append)
        outcome["forged"] = repr(wait())
    except BtlError as exc:
        outcome["forged"] = repr(exc)
    s.p2p.send(1, tag=8, buf=bytes(8), timeout=60)
    return outcome


def main() -> None:
    threading.Thread(target=threading.Event().wait, daemon=True).start()
    rank, size, path, scenario, mca = (
        int(sys.argv[1]),
        int(sys.argv[2]),
        sys.argv[3],
        sys.argv[4],
        json.loads(sys.argv[5]),
    )
    world = SocketWorld(rank, size, path)
    if scenario == "refused-probe":
        refuse_cma()
    report: dict[str, object] = {"rank": rank, "before": sm_state()}
    with pmca.Session(mca=mca, world=world) as s:
        sm = next(m for m in s.modules("btl") if m.name == "sm")
        report["reach"] = {peer: s.reach(peer) for peer in range(size) if peer != rank}
        report["mechanism"] = sm.mechanism
        report["attached_via"] = sorted(set(sm.attached_via.values()))
        report["during"] = sm_state()
        if scenario == "refused-use":
            refuse_cma()
        if scenario.startswith("refused"):
            report["wrong"] = echo_sizes(s, rank, [0, 5000, 1 << 20])
            report["mechanism_after"] = sm.mechanism
        if scenario == "sizes":
            report["wrong"] = echo_sizes(s, rank, SIZES)
        elif scenario == "rdma":
            report["rdma"] = rdma(s, rank)
        elif scenario == "ring":
            report["wrong"] = ring(s, rank, size)
        elif scenario == "killed":
            if rank == 1:
                os.kill(os.getpid(), signal.SIGKILL)
            into = bytearray(64)
            started = time.monotonic()
            try:
                s.p2p.recv(1, tag=2, buf=into, timeout=60)
                report["error"] = None
            except (PeerFailed, TimeoutError) as exc:
                report["error"] = f"{type(exc).__name__}: {exc}"
            report["noticed_after"] = time.monotonic() - started
        if scenario != "killed":
            world.barrier()
    report["after"] = sm_state()
    print(json.dumps(report), flush=True)


if __name__ == "__main__":
    main()
