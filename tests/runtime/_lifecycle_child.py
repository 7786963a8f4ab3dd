"""Code the lifecycle tests run in child processes (imported there, not by pytest).

Shared by the interrupt, fork and exit tests: what "pmca left libc and its
own state as it found them" means, checked the same way everywhere.
"""

from __future__ import annotations

import ctypes
import mmap
from collections.abc import Callable

import pmca
from pmca.native import dispatcher
from pmca.patcher import PatchRecord
from pmca.runtime import RUNTIME

#: The libc functions memory/patcher patches.
SYMBOLS = ("munmap", "madvise", "mremap", "brk", "shmdt", "mmap")
FRAMEWORKS = ["memory"]
_LIBC = ctypes.CDLL("libc.so.6")


def entry_bytes() -> dict[str, bytes]:
    """The first 16 bytes of each patchable libc function, as they are now."""
    return {
        symbol: ctypes.string_at(ctypes.cast(getattr(_LIBC, symbol), ctypes.c_void_p).value, 16)
        for symbol in SYMBOLS
    }


def _address(region: mmap.mmap) -> int:
    view = ctypes.c_char.from_buffer(region)
    try:
        return ctypes.addressof(view)
    finally:
        del view


def delivering_cycle() -> tuple[list[PatchRecord], bool]:
    """A complete session: patch records seen, and whether a munmap event arrived."""
    got: list[tuple[int, int, str]] = []

    def callback(address: int, length: int, kind: str, from_alloc: bool) -> None:
        got.append((address, length, kind))

    with pmca.Session(frameworks=FRAMEWORKS):
        handle = pmca.memory.register_release(callback)
        records = pmca.patcher.current().patches()
        region = mmap.mmap(-1, 1 << 20)
        address = _address(region)
        region.close()
        pmca.memory.drain()
        handle.unregister()
    delivered = any(
        kind == "munmap" and start <= address < start + length for start, length, kind in got
    )
    return records, delivered


def consistency_problems(
    baseline: dict[str, bytes], records: list[PatchRecord], *, sessions: int = 0
) -> list[str]:
    """What disagrees between pmca's state and libc when ``sessions`` are active."""
    problems: list[str] = []
    if RUNTIME.sessions != sessions:
        problems.append(f"RUNTIME.sessions is {RUNTIME.sessions}, expected {sessions}")
    if len(RUNTIME.live) != sessions:
        problems.append(f"{len(RUNTIME.live)} live session(s), expected {sessions}")
    if sessions == 0:
        if RUNTIME.frameworks:
            problems.append(f"frameworks left open: {sorted(RUNTIME.frameworks)}")
        if dispatcher().subscriber_count:
            problems.append(f"{dispatcher().subscriber_count} release subscription(s) leaked")
        now = entry_bytes()
        problems.extend(
            f"{symbol} entry is {now[symbol].hex()}, was {baseline[symbol].hex()}"
            for symbol in SYMBOLS
            if now[symbol] != baseline[symbol]
        )
        problems.extend(
            f"{record.symbol} patch site {record.address:#x} not restored"
            for record in records
            if ctypes.string_at(record.address, len(record.original)) != record.original
        )
    return problems


def noop_callback() -> Callable[[int, int, str, bool], None]:
    def callback(address: int, length: int, kind: str, from_alloc: bool) -> None:
        pass

    return callback
