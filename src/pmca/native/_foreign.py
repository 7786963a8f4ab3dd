"""Who else patched libc: follow the jump at a release function's entry to its owner.

UCX's ucm writes ``jmp rel32`` (or ``movabs $hook, %rax; jmp *%rax``) into
libc; Open MPI's patcher and libfabric's memhooks write ``movabs $hook,
%r11; jmp *%r11``.  The owner is the mapping the jump lands in, read from
``/proc/self/maps``; a short jump is followed through padding and a
trampoline page, which is what pmca's own patch looks like.
"""

from __future__ import annotations

import bisect
import ctypes
import os

import attrs

from .._public import public
from .._records import FrozenValue
from ._backend import HookBackend

_MAX_HOPS = 4

#: Library name fragments -> who patches with them.
_OWNERS: tuple[tuple[str, str], ...] = (
    ("libucm", "UCX ucm"),
    ("libopen-pal", "Open MPI's patcher"),
    ("libfabric", "libfabric memhooks"),
    ("libpmca_hooks", "pmca"),
)


@public
@attrs.frozen(eq=False, repr=False)
class ForeignPatch(FrozenValue):
    """A release function whose entry jumps somewhere pmca did not send it."""

    symbol: str
    address: int
    found: bytes
    target: int | None
    owner_path: str | None

    @property
    def owner(self) -> str:
        """Who patched it, e.g. ``"UCX ucm (libucm.so.0)"``."""
        if self.owner_path is None:
            return "an unknown patcher (the jump could not be followed)"
        name = os.path.basename(self.owner_path)
        for fragment, who in _OWNERS:
            if fragment in name:
                return f"{who} ({name})"
        if not self.owner_path.startswith("/"):
            return f"an unknown patcher (jump into {self.owner_path or 'anonymous memory'})"
        return f"an unknown patcher ({self.owner_path})"

    @property
    def is_ucm(self) -> bool:
        return self.owner_path is not None and "libucm" in os.path.basename(self.owner_path)

    def __str__(self) -> str:
        where = f" -> {self.target:#x}" if self.target is not None else ""
        return f"{self.symbol}: [{self.found[:8].hex(' ')}]{where} by {self.owner}"


def _jump_target(address: int) -> int | None:
    """Where the instruction at ``address`` jumps, if it is a jump we know."""
    code = ctypes.string_at(address, 16)
    if code[:4] == b"\xf3\x0f\x1e\xfa":  # endbr64
        return _jump_target(address + 4)
    if code[0] == 0xE9:
        return address + 5 + int.from_bytes(code[1:5], "little", signed=True)
    if code[0] == 0xEB:
        return address + 2 + int.from_bytes(code[1:2], "little", signed=True)
    if code[:2] == b"\x49\xbb" and code[10:13] == b"\x41\xff\xe3":  # movabs r11; jmp r11
        return int.from_bytes(code[2:10], "little")
    if code[:2] == b"\x48\xb8" and code[10:12] == b"\xff\xe0":  # movabs rax; jmp rax
        return int.from_bytes(code[2:10], "little")
    if code[:2] == b"\xff\x25":  # jmp *rel32(%rip)
        slot = address + 6 + int.from_bytes(code[2:6], "little", signed=True)
        return int.from_bytes(ctypes.string_at(slot, 8), "little")
    return None


class _Maps:
    """``/proc/self/maps`` as sorted ranges, read once per question."""

    def __init__(self) -> None:
        self.starts: list[int] = []
        self.entries: list[tuple[int, int, str]] = []
        with open("/proc/self/maps", encoding="utf-8", errors="replace") as maps:
            for line in maps:
                fields = line.split(maxsplit=5)
                start, _, end = fields[0].partition("-")
                path = fields[5].strip() if len(fields) > 5 else ""
                self.starts.append(int(start, 16))
                self.entries.append((int(start, 16), int(end, 16), path))

    def path_of(self, address: int) -> str | None:
        index = bisect.bisect_right(self.starts, address) - 1
        if index < 0:
            return None
        start, end, path = self.entries[index]
        return path if start <= address < end else None


def _follow(address: int, maps: _Maps) -> tuple[int | None, str | None]:
    """Follow jumps until one lands in a named library (or we give up)."""
    target = _jump_target(address)
    hops = 0
    while target is not None and hops < _MAX_HOPS:
        path = maps.path_of(target)
        if path is None:
            return target, None
        if path.startswith("/"):
            return target, path
        following = _jump_target(target)  # padding or a trampoline page: keep going
        if following is None:
            return target, path
        target, hops = following, hops + 1
    return target, None


@public
def foreign_patches(
    hooks: HookBackend, symbols: tuple[str, ...] | None = None
) -> dict[str, ForeignPatch]:
    """The release functions whose entry holds a jump that is not pmca's live patch."""
    maps: _Maps | None = None  # read only if some entry holds a jump: most sessions find none
    found: dict[str, ForeignPatch] = {}
    for symbol in hooks.symbols if symbols is None else symbols:
        if hooks.is_installed(symbol):
            continue
        address = hooks.address(symbol)
        if not address:
            continue
        code = ctypes.string_at(address, 16)
        if _jump_target(address) is None:
            continue
        if maps is None:
            maps = _Maps()
        target, path = _follow(address, maps)
        found[symbol] = ForeignPatch(symbol, address, code, target, path)
    return found
