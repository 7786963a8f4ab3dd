"""A two-process check of each btl: this process and a child it starts.

Both open a session with ``btl = self,<component>`` over a socket-pair world;
rank 0 sends a small and a large message, rank 1 echoes them, and rank 0
compares checksums and times the round trips. Used by ``pmca doctor``.
"""

from __future__ import annotations

import hashlib
import json
import os
import socket
import subprocess
import sys
import time
from typing import Any

from attrs import frozen

_ROUNDS = 200
_LARGE = 8 << 20


@frozen
class LoopbackResult:
    """One btl's check. ``detail`` says what happened in one line; ``reason``
    is why a failed check failed, in words (no exception type, no line of the
    child's output: what a report about someone else's component shows)."""

    btl: str
    ok: bool
    detail: str
    latency_us: float | None = None
    bandwidth_mb_s: float | None = None
    reason: str = ""
    #: False when the btl carried nothing to the peer process (it reaches no peer).
    reached_peer: bool = True


class _NotReached(Exception):
    """The btl under check does not carry the messages to the peer process."""


def _echo(p2p: Any, rank: int) -> tuple[float, float]:
    small = bytearray(8)
    large = bytearray(os.urandom(_LARGE) if rank == 0 else _LARGE)
    if rank == 0:
        digest = hashlib.blake2b(large).digest()
        start = time.perf_counter()
        for _ in range(_ROUNDS):
            p2p.send(1, 1, small)
            p2p.recv(1, 1, small)
        latency = (time.perf_counter() - start) / (2 * _ROUNDS)
        start = time.perf_counter()
        p2p.send(1, 2, large)
        p2p.recv(1, 2, large)
        bandwidth = 2 * _LARGE / (time.perf_counter() - start)
        if hashlib.blake2b(large).digest() != digest:
            raise AssertionError(f"the {_LARGE}-byte echo came back corrupted")
        return latency, bandwidth
    for _ in range(_ROUNDS):
        p2p.recv(0, 1, small)
        p2p.send(0, 1, small)
    p2p.recv(0, 2, large)
    p2p.send(0, 2, large)
    return 0.0, 0.0


def run_side(
    btl: str, fd: int, rank: int, timeout: float, mca: dict[str, Any] | None = None
) -> tuple[float, float, int]:
    """One side of the check.

    Rank 0 returns the latency in s, the bandwidth in B/s and how many sends
    its btl made zero-copy.
    """
    from ..session import Session
    from ..world import PairWorld

    sock = socket.socket(fileno=fd)
    settings = {**(mca or {}), "btl": f"self,{btl}", "pmca_base_modex_timeout": timeout}
    with Session(mca=settings, frameworks=["btl"], world=PairWorld(sock, rank)) as session:
        reach = session.reach(1 - rank)
        if not reach or reach[0] != btl:
            through = f"through {', '.join(reach)}" if reach else "through no btl"
            raise _NotReached(
                f"its modules do not reach the peer process (rank {rank} reaches it {through})"
            )
        latency, bandwidth = _echo(session.p2p, rank)
        zerocopy = sum(int(getattr(m, "zerocopy_sends", 0)) for m in session.modules("btl"))
        return latency, bandwidth, zerocopy


def _child_main() -> None:
    btl, fd, timeout, mca = sys.argv[1], int(sys.argv[2]), float(sys.argv[3]), sys.argv[4]
    run_side(btl, fd, 1, timeout, json.loads(mca))


def check_self(btl: str = "self") -> LoopbackResult:
    """A btl that reaches this process (``self``, or a loopback of another
    distribution) as the only btl: one process messaging itself, small and large."""
    from ..session import Session

    try:
        with Session(mca={"btl": btl}, frameworks=["btl"]) as session:
            if session.reach(0) != [btl]:
                raise _NotReached(f"it does not reach its own process either ({btl} alone)")
            p2p = session.p2p
            data = os.urandom(_LARGE)
            for size in (0, 8, _LARGE):
                out = bytearray(size)
                request = p2p.irecv(0, 1, out)
                p2p.send(0, 1, data[:size])
                request.wait(timeout=60)
                if out != data[:size]:
                    raise AssertionError(f"{size}-byte message to self came back corrupted")
    except Exception as exc:
        return LoopbackResult(btl, False, f"{type(exc).__name__}: {exc}", reason=str(exc))
    return LoopbackResult(btl, True, "0 B, 8 B and 8 MiB messages to itself, checksums equal")


def check(btl: str, timeout: float = 60.0, mca: dict[str, Any] | None = None) -> LoopbackResult:
    """Run the two-process check of ``btl``; never raises."""
    parent, child_end = socket.socketpair()
    code = "from pmca.cli._btl_loopback import _child_main; _child_main()"
    args = [sys.executable, "-c", code, btl, str(child_end.fileno()), str(timeout)]
    args.append(json.dumps(mca or {}))
    try:
        child = subprocess.Popen(
            args, pass_fds=[child_end.fileno()], stdout=subprocess.PIPE, stderr=subprocess.PIPE
        )
    except OSError as exc:
        return LoopbackResult(btl, False, f"cannot start the child: {exc}")
    child_end.close()
    try:
        latency, bandwidth, zerocopy = run_side(btl, parent.detach(), 0, timeout, mca)
    except Exception as exc:
        child.kill()
        _, err = child.communicate(timeout=timeout)
        tail = err.decode(errors="replace").strip().splitlines()[-1:] or [""]
        reached = not isinstance(exc, _NotReached)
        reason = f"{type(exc).__name__}: {exc}" if reached else str(exc)
        return LoopbackResult(
            btl,
            False,
            f"{type(exc).__name__}: {exc} {tail[0]}".strip(),
            reason=reason,
            reached_peer=reached,
        )
    try:
        _, err = child.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        child.kill()
        why = f"the child did not finish within {timeout:g} s"
        return LoopbackResult(btl, False, why, reason=why)
    if child.returncode != 0:
        tail = err.decode(errors="replace").strip().splitlines()[-1:] or [""]
        return LoopbackResult(
            btl,
            False,
            f"child exited with {child.returncode}: {tail[0]}",
            reason=f"the peer process exited with status {child.returncode}",
        )
    return LoopbackResult(
        btl,
        True,
        f"8 B latency {latency * 1e6:.1f} us, {_LARGE >> 20} MiB bandwidth "
        f"{bandwidth / 1e6:.0f} MB/s, checksums equal"
        + (f", {zerocopy} zero-copy sends" if zerocopy else ""),
        latency * 1e6,
        bandwidth / 1e6,
    )
