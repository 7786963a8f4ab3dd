"""Seed scenario 4: the stale registration (2009 OpenFabrics thread), with really pinned pages.

An RDMA registration pins the physical pages behind a range; a registration
cache keeps it after the user is done (``mpi_leave_pinned``), keyed by
address.  The user frees buffer A back to the operating system, buffer B is
mapped at the same address, and a cache that never heard of the release
hands out A's registration for B: the transport moves A's pinned pages.
Wrong data, no error anywhere.

Here the registration is real: pmca's grdma cache over the io_uring backend,
whose registered buffers pin pages exactly as ``ibv_reg_mr`` does, and the
data moves with ``IORING_OP_WRITE_FIXED`` through the registration into a
socket; the receiver compares bytes.

- ``memory=none, mpi_leave_pinned=1``: no hooks, the cache keeps A's
  registration, the receiver gets A's bytes (reproduced);
- ``pmca hooks``: the munmap of A is published before the syscall, drained
  before the next lookup, and invalidates A's registration; the receiver
  gets B's bytes (prevented);
- threaded: one thread frees and remaps buffers while others register and
  send through the same cache; every received byte is checked.

Needs Linux io_uring (5.19 or later, ``kernel.io_uring_disabled=0``).
"""

from __future__ import annotations

import ctypes
import random
import socket
import threading
from typing import Any

from .._libc import MAP_ANONYMOUS, MAP_FIXED_NOREPLACE, MAP_PRIVATE, PAGE, PROT_READ, PROT_WRITE
from .._sockets import recv_exactly
from ._common import emit, run_child, skipped_without_native
from ._result import Outcome, ScenarioResult

SCENARIO = "stale-registration"
LENGTH = 16 * PAGE
#: Iterations of the threaded variant with pmca's hooks (sends checked byte by byte).
ITERATIONS = 10_000
_SLOT_PAGES = 4


def _libc() -> Any:
    from .._libc import libc

    return libc()


def _map(length: int, at: int = 0) -> int:
    flags = MAP_PRIVATE | MAP_ANONYMOUS | (MAP_FIXED_NOREPLACE if at else 0)
    address = int(_libc().mmap(at, length, PROT_READ | PROT_WRITE, flags))
    if at and address != at:
        raise OSError(f"mapped at {address:#x}, not {at:#x}")
    return address


def _unmap(address: int, length: int) -> None:
    if _libc().munmap(address, length) != 0:
        raise OSError(ctypes.get_errno(), "munmap failed")


def _channel() -> tuple[socket.socket, socket.socket]:
    sender, receiver = socket.socketpair()
    for sock in (sender, receiver):
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, 4 * LENGTH)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4 * LENGTH)
    return sender, receiver


def _session_settings(variant: str) -> dict[str, object]:
    mca: dict[str, object] = {"mpi_leave_pinned": 1}
    if variant.startswith("no-hooks"):
        mca["memory"] = "none"
    return mca


def _child(variant: str, iterations: str = "0") -> None:
    """Entry point of a child process."""
    from .. import rcache
    from ..rcache.iouring import IoUringBackend
    from ..session import Session

    with Session(mca=_session_settings(variant)):
        backend = IoUringBackend(table_size=256)
        cache: Any = rcache.create("grdma", backend)
        try:
            if variant.endswith("threaded"):
                payload = _threaded(cache, backend, int(iterations))
            else:
                payload = _single(cache, backend)
            payload["coherent"] = cache.coherent
            payload["leave_pinned"] = cache.leave_pinned
        finally:
            cache.close()
            backend.close()
    emit(payload)


def _single(cache: Any, backend: Any) -> dict[str, Any]:
    sender, receiver = _channel()
    a = _map(LENGTH)
    ctypes.memset(a, ord("A"), LENGTH)
    first = cache.register(a, LENGTH)
    backend.write_fixed(sender.fileno(), a, LENGTH, first.handle)
    sane = recv_exactly(receiver, LENGTH, "a buffer's bytes") == b"A" * LENGTH
    cache.deregister(first)  # leave_pinned: stays registered, pinned, cached
    _unmap(a, LENGTH)  # A goes back to the operating system
    try:
        b = _map(LENGTH, at=a)
    except OSError as exc:
        return {"error": f"could not map B at A's address {a:#x}: {exc}"}
    ctypes.memset(b, ord("B"), LENGTH)
    second = cache.register(b, LENGTH)
    backend.write_fixed(sender.fileno(), b, LENGTH, second.handle)
    data = recv_exactly(receiver, LENGTH, "a buffer's bytes")
    cache.deregister(second)
    return {
        "sane": sane,
        "same_registration": second is first,
        "first_valid": first.valid,
        "received_prefix": data[:4].decode(errors="replace"),
        "wrong_bytes": sum(1 for byte in data if byte != ord("B")),
    }


class _Slot:
    """A buffer that one thread frees and remaps while others send from it."""

    def __init__(self, number: int) -> None:
        self.lock = threading.Lock()
        self.length = _SLOT_PAGES * PAGE
        self.address = _map(self.length)
        self.fill = 0
        self.number = number
        self.refill()

    def refill(self) -> None:
        self.fill = self.fill % 250 + 1
        ctypes.memset(self.address, self.fill, self.length)

    def remap(self) -> bool:
        """munmap and map again at the same address; False when someone took it meanwhile."""
        _unmap(self.address, self.length)
        try:
            self.address = _map(self.length, at=self.address)
            same = True
        except OSError:
            self.address = _map(self.length)
            same = False
        self.refill()
        return same


def _threaded(cache: Any, backend: Any, iterations: int) -> dict[str, Any]:
    slots = [_Slot(n) for n in range(4)]
    senders = 3
    done = threading.Event()
    counts = {"sends": 0, "wrong_bytes": 0, "wrong_sends": 0, "remaps": 0, "moved": 0}
    counts_lock = threading.Lock()
    errors: list[str] = []

    def send(seed: int) -> None:
        rng = random.Random(seed)
        sender, receiver = _channel()
        try:
            for _ in range(-(-iterations // senders)):
                slot = slots[rng.randrange(len(slots))]
                with slot.lock:
                    offset = rng.randrange(slot.length // 2)
                    size = rng.randrange(1, slot.length - offset)
                    address = slot.address + offset
                    registration = cache.register(address, size)
                    backend.write_fixed(sender.fileno(), address, size, registration.handle)
                    data = recv_exactly(receiver, size, "a buffer's bytes")
                    cache.deregister(registration)
                    wrong = size - data.count(slot.fill)
                with counts_lock:
                    counts["sends"] += 1
                    counts["wrong_bytes"] += wrong
                    counts["wrong_sends"] += wrong > 0
        except Exception as exc:
            errors.append(repr(exc))
        finally:
            sender.close()
            receiver.close()

    def remap() -> None:
        rng = random.Random(7)
        while not done.is_set():
            slot = slots[rng.randrange(len(slots))]
            with slot.lock:
                same = slot.remap()
            with counts_lock:
                counts["remaps"] += 1
                counts["moved"] += not same
            done.wait(0.0002)

    remapper = threading.Thread(target=remap, name="remapper")
    workers = [threading.Thread(target=send, args=(n,), name=f"sender-{n}") for n in range(senders)]
    remapper.start()
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join()
    done.set()
    remapper.join()
    stats = cache.stats()
    return {**counts, "errors": errors[:3], "invalidations": stats.invalidations}


def _run(variant: str, timeout: float, iterations: int = 0) -> dict[str, Any] | str:
    child = run_child(__name__, "_child", variant, str(iterations), hang_after=timeout)
    if not child.completed or child.payload is None:
        return child.describe_failure()
    if "error" in child.payload:
        return str(child.payload["error"])
    return child.payload


def _single_row(variant: str, label: str, timeout: float) -> ScenarioResult:
    p = _run(variant, timeout)
    if isinstance(p, str):
        return ScenarioResult(SCENARIO, label, "failed", p)
    if not p["sane"]:
        return ScenarioResult(SCENARIO, label, "failed", "A itself did not arrive intact")
    got = f"receiver got {p['received_prefix']!r}... ({p['wrong_bytes']} of {LENGTH} bytes wrong)"
    if variant == "no-hooks":
        if p["coherent"]:
            return ScenarioResult(SCENARIO, label, "failed", "hooks were installed anyway")
        if p["wrong_bytes"] == LENGTH and p["same_registration"]:
            return ScenarioResult(
                SCENARIO, label, "reproduced", f"B at A's address, A's registration reused: {got}"
            )
        return ScenarioResult(SCENARIO, label, "failed", f"no stale data: {got}")
    if p["wrong_bytes"] == 0 and not p["same_registration"] and not p["first_valid"]:
        return ScenarioResult(
            SCENARIO, label, "prevented", f"A's munmap invalidated its registration; {got}"
        )
    return ScenarioResult(SCENARIO, label, "failed", got)


def _threaded_row(variant: str, label: str, timeout: float, iterations: int) -> ScenarioResult:
    p = _run(variant, timeout, iterations)
    if isinstance(p, str):
        return ScenarioResult(SCENARIO, label, "failed", p)
    if p["errors"]:
        return ScenarioResult(SCENARIO, label, "failed", "; ".join(p["errors"]))
    summary = (
        f"{p['sends']} sends, {p['remaps']} free+remaps: "
        f"{p['wrong_bytes']} wrong bytes in {p['wrong_sends']} sends"
    )
    outcome: Outcome
    if variant.startswith("no-hooks"):
        outcome = "reproduced" if p["wrong_bytes"] > 0 else "failed"
    else:
        outcome = "prevented" if p["wrong_bytes"] == 0 and p["sends"] >= iterations else "failed"
    return ScenarioResult(SCENARIO, label, outcome, summary)


def unavailable_reason() -> str | None:
    """Why this scenario cannot run here, or None."""
    from .. import native
    from ..rcache.iouring import unavailable_reason as uring_reason

    return native.unavailable_reason() or uring_reason()


def run(
    *, timeout: float = 60.0, iterations: int = ITERATIONS, threaded: bool = True
) -> list[ScenarioResult]:
    """Without hooks (stale bytes) and with pmca's hooks (right bytes), then threaded."""
    skipped = skipped_without_native(SCENARIO, unavailable_reason)
    if skipped is not None:
        return skipped
    rows = [
        _single_row("no-hooks", "memory=none, leave_pinned, io_uring", timeout),
        _single_row("hooks", "pmca hooks, grdma + io_uring", timeout),
    ]
    if threaded:
        rows += [
            _threaded_row(
                "no-hooks-threaded", "threaded, memory=none", timeout, max(iterations // 5, 300)
            ),
            _threaded_row("hooks-threaded", "threaded, pmca hooks", timeout, iterations),
        ]
    return rows
