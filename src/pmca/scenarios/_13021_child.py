"""The child process of the ompi-13021 scenario: ``sessions_init_twice``, reported.

Runs complete session lifetimes one after the other in this process (the
memory component and the load mode come from the environment, as
``PMCA_MCA_*`` variables) and prints one JSON record per step on stdout,
flushed at once, so that the parent still knows how far it got when the
process dies of a signal. ``examples/sessions_init_twice.py`` is the same
program written for people.
"""

from __future__ import annotations

import json
import mmap
import sys
from typing import Any

import pmca

#: Prefix of every record line (pmca logs go to stderr, but be explicit).
MARKER = "pmca-13021: "
#: An unusual size, so that the munmap event of this region is unmistakable.
REGION = (256 + 7) * mmap.PAGESIZE


def emit(event: str, **fields: Any) -> None:
    """Print one record and flush: the next step may kill the process."""
    print(MARKER + json.dumps({"event": event, **fields}), flush=True)


def parse(stdout: str) -> list[dict[str, Any]]:
    """The records a child printed, in order."""
    records: list[dict[str, Any]] = []
    for line in stdout.splitlines():
        if line.startswith(MARKER):
            record = json.loads(line[len(MARKER) :])
            if isinstance(record, dict):
                records.append(record)
    return records


def one_round(number: int) -> None:
    """One session: install the hooks through a release callback, munmap, drain."""
    with pmca.Session() as session:
        memory = session.components("memory")
        patcher = session.components("patcher")
        released: list[tuple[int, str]] = []

        def on_release(address: int, length: int, kind: str, from_alloc: bool) -> None:
            released.append((length, kind))

        handle = pmca.memory.register_release(on_release)
        support = pmca.memory.support_level()
        hooked = pmca.native.backend().is_installed("munmap")
        region = mmap.mmap(-1, REGION)
        region.close()  # munmap through libc's entry point
        pmca.memory.drain()
        handle.unregister()
        emit(
            "round",
            round=number,
            memory=[[c.name, c.load_mode] for c in memory],
            patcher=[[c.name, c.load_mode] for c in patcher],
            support=int(support),
            munmap_hooked=hooked,
            delivered=(REGION, "munmap") in released,
        )
    emit("finalized", round=number)


def main(rounds: int = 2) -> int:
    """Run ``rounds`` sessions; compare libc's prologues before and after them all."""
    reason = pmca.native.unavailable_reason()
    if reason is not None:
        emit("unavailable", reason=reason)
        return 0
    hooks = pmca.native.backend()
    originals = {s: hooks.prologue(s) for s in hooks.symbols if hooks.address(s)}
    emit("start", rounds=rounds, symbols=sorted(originals))
    for number in range(1, rounds + 1):
        try:
            one_round(number)
        except pmca.StaleReferenceError as exc:
            emit("stale", round=number, message=str(exc))
            return 1
    changed = sorted(s for s, before in originals.items() if hooks.prologue(s) != before)
    emit("end", prologues_restored=not changed, changed=changed)
    return 0


if __name__ == "__main__":
    sys.exit(main(int(sys.argv[1]) if len(sys.argv) > 1 else 2))
