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


def one_round(number: int, btl: str = "") -> None:
    """One session: hooks from the btl's registration needs (or a release
    callback), data moved, a munmap caught, drained.

    ``btl`` is the seed's trigger: ``ofi`` needs registration, so its
    selection activates the memory hooks (at init under a launcher; in this
    world of one rank at the first use of the btl, which the round makes
    first, as ``MPI_Init`` selects its btls); ``tcp`` does not,
    and the hooks come with the first release callback. ``""`` opens the
    btl framework with its default selection.
    """
    hooks = pmca.native.backend()
    with pmca.Session(mca={"btl": f"self,{btl}"} if btl else {}) as session:
        selected = [c.name for c in session.components("btl")]
        hooked_at_selection = hooks.is_installed("munmap")
        moved = move_data(session, btl)
        memory = session.components("memory")
        patcher = session.components("patcher")
        released: list[tuple[int, str]] = []

        def on_release(address: int, length: int, kind: str, from_alloc: bool) -> None:
            released.append((length, kind))

        handle = pmca.memory.register_release(on_release)
        support = pmca.memory.support_level()
        hooked = hooks.is_installed("munmap")
        library_part = overwrite_base_part(session)
        region = mmap.mmap(-1, REGION)
        region.close()  # munmap through libc's entry point
        pmca.memory.drain()
        handle.unregister()
        emit(
            "round",
            round=number,
            btl=selected,
            memory=[[c.name, c.load_mode] for c in memory],
            patcher=[[c.name, c.load_mode] for c in patcher],
            support=int(support),
            hooked_at_selection=hooked_at_selection,
            munmap_hooked=hooked,
            moved=moved,
            delivered=(REGION, "munmap") in released,
            base_part=library_part,
        )
    emit("finalized", round=number)


def overwrite_base_part(session: pmca.Session) -> int | None:
    """Where this session's patcher/overwrite library keeps its base part (None: not open).

    Its address tells whether a library loaded again in a later session
    came back at the same address, which the raw pointer of the
    reproduction then leads into.
    """
    if not any(c.name == "overwrite" for c in session.components("patcher")):
        return None
    part = getattr(session.module("patcher"), "base_part", None)
    return int(part()[0]) if part is not None else None


def move_data(session: pmca.Session, btl: str) -> bool:
    """Move bytes through the session: over ``btl`` to this process where it can."""
    payload = bytes(range(256)) * 64
    if btl == "ofi":
        module = next(m for m in session.modules("btl") if getattr(m, "name", "") == "ofi")
        return _ofi_put_get(module, payload)
    out = bytearray(len(payload))
    request = session.p2p.irecv(0, 5, out)
    session.p2p.send(0, 5, payload)
    request.wait()
    return bytes(out) == payload


def _ofi_put_get(module: Any, payload: bytes) -> bool:
    """fi_write then fi_read through the ofi module, into this process's registration."""
    import ctypes

    me = module.endpoint(0)
    target = ctypes.create_string_buffer(len(payload))
    back = bytearray(len(payload))
    handle = module.register_mem(None, ctypes.addressof(target), len(payload))
    done: list[BaseException | None] = []
    try:
        address = ctypes.addressof(target)
        module.put(me, memoryview(payload), None, address, handle.packed, done.append)
        while not done:
            module.progress()
        module.get(me, memoryview(back), None, address, handle.packed, done.append)
        while len(done) < 2:
            module.progress()
    finally:
        module.deregister_mem(handle)
    return done == [None, None] and target.raw == payload == bytes(back)


def main(rounds: int | str = 2, btl: str = "") -> int:
    """Run ``rounds`` sessions; compare libc's prologues before and after them all."""
    rounds = int(rounds)
    reason = pmca.native.unavailable_reason()
    if reason is not None:
        emit("unavailable", reason=reason)
        return 0
    hooks = pmca.native.backend()
    originals = {s: hooks.prologue(s) for s in hooks.symbols if hooks.address(s)}
    emit("start", rounds=rounds, symbols=sorted(originals))
    for number in range(1, rounds + 1):
        try:
            one_round(number, btl)
        except pmca.StaleReferenceError as exc:
            emit("stale", round=number, message=str(exc))
            return 1
    changed = sorted(s for s, before in originals.items() if hooks.prologue(s) != before)
    emit("end", prologues_restored=not changed, changed=changed)
    return 0


if __name__ == "__main__":
    sys.exit(main(*sys.argv[1:3]))
