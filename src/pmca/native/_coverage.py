"""coverage(): run every memory-release path for real and report what is caught."""

from __future__ import annotations

import _ctypes
import ctypes
import mmap
import os
import sys
from collections.abc import Callable, Iterator
from functools import partial
from pathlib import Path
from typing import Any

import attrs

from .._libc import MADV_DONTNEED, MREMAP_MAYMOVE, PAGE, Libc, libc
from .._public import public
from ._abi import probe_library_path
from ._backend import backend
from ._dispatch import dispatcher
from ._measure import Measure, describe_sources, hooks_installed, observing, ucm_for_refused

MIB = 1 << 20
_ANY_RELEASE = ("munmap", "madvise", "mremap", "brk", "mmap_fixed")


class NotRunnable(Exception):
    """This path cannot be exercised on this machine (the message says why)."""


@public
@attrs.frozen(slots=True)
class PathResult:
    """What happened when one release path was run with the hooks installed."""

    name: str
    description: str
    expected: bool  # False: a documented miss
    caught: bool | None  # None: could not be run here
    kinds: tuple[str, ...] = ()
    note: str = ""

    @property
    def outcome(self) -> str:
        if self.caught is None:
            return "not run"
        if self.expected:
            return "caught" if self.caught else "MISSED"
        return "caught (beyond documented)" if self.caught else "documented miss"

    @property
    def ok(self) -> bool:
        """False only for a path that should be caught and was not."""
        return not (self.expected and self.caught is False)


@public
@attrs.frozen
class Coverage:
    """Per release path, whether the native hooks saw it."""

    paths: tuple[PathResult, ...]
    hooks: dict[str, str]
    #: What delivered the events of this run: ``"own patches"`` and ``"ucm"``,
    #: each described (paths caught through ucm show the kind ``vm_unmapped``).
    sources: dict[str, str] = attrs.field(factory=dict)

    def __getitem__(self, name: str) -> PathResult:
        for path in self.paths:
            if path.name == name:
                return path
        raise KeyError(name)

    def __iter__(self) -> Iterator[PathResult]:
        return iter(self.paths)

    @property
    def missed(self) -> tuple[str, ...]:
        """Paths that should be caught but were not."""
        return tuple(path.name for path in self.paths if not path.ok)

    @property
    def ok(self) -> bool:
        return not self.missed

    def as_dict(self) -> dict[str, Any]:
        return {
            "hooks": dict(self.hooks),
            "sources": dict(self.sources),
            "paths": {
                path.name: {
                    "description": path.description,
                    "expected": path.expected,
                    "caught": path.caught,
                    "outcome": path.outcome,
                    "kinds": list(path.kinds),
                    "note": path.note,
                }
                for path in self.paths
            },
        }

    def __str__(self) -> str:
        rows = [("path", "outcome", "events", "what was done / note")]
        for path in self.paths:
            detail = path.description + (f" ({path.note})" if path.note else "")
            rows.append((path.name, path.outcome, ",".join(path.kinds) or "-", detail))
        widths = [max(len(row[i]) for row in rows) for i in range(3)]
        lines = ["event sources:"]
        lines.extend(f"  {source:<12} {state}" for source, state in self.sources.items())
        lines.append("native hooks:")
        lines.extend(f"  {symbol:<8} {state}" for symbol, state in self.hooks.items())
        lines.append("release paths:")
        for row in rows:
            cells = (cell.ljust(width) for cell, width in zip(row[:3], widths, strict=True))
            lines.append("  " + "  ".join(cells) + "  " + row[3])
        return "\n".join(lines)


# -- the paths -------------------------------------------------------------------------
# Each returns (description, kinds seen, note).

PathOutcome = tuple[tuple[str, ...], str]


def free_large(c: Libc, m: Measure) -> PathOutcome:
    size = 64 * MIB  # above glibc's largest dynamic mmap threshold (32 MiB)
    block = c.malloc(size)
    c.touch(block, PAGE)
    m.begin()
    c.free(block)
    return m.seen([(block, block + size)], ("munmap",)), ""


def realloc_growth(c: Libc, m: Measure) -> PathOutcome:
    block = c.malloc(40 * MIB)
    c.touch(block, PAGE)
    m.begin()
    grown = c.realloc(block, 80 * MIB)
    try:
        return m.seen([(block, block + 40 * MIB)], ("mremap",)), ""
    finally:
        c.free(grown)


def malloc_trim(c: Libc, m: Measure) -> PathOutcome:
    size = 64 * 1024  # below the mmap threshold: served from an arena
    blocks = [c.malloc(size) for _ in range(64)]
    guard = c.malloc(size)  # keeps the freed blocks from merging into the top chunk
    for block in blocks:
        c.touch(block, size)
    m.begin()
    for block in blocks:
        c.free(block)
    c.malloc_trim(0)
    try:
        return m.seen([(min(blocks), max(blocks) + size)], _ANY_RELEASE), ""
    finally:
        c.free(guard)


def direct_munmap(c: Libc, m: Measure) -> PathOutcome:
    region = c.map_anonymous(4 * PAGE)
    c.touch(region, 4 * PAGE)
    m.begin()
    c.munmap(region, 4 * PAGE)
    return m.seen([(region, region + 4 * PAGE)], ("munmap",)), ""


def direct_madvise(c: Libc, m: Measure) -> PathOutcome:
    region = c.map_anonymous(4 * PAGE)
    c.touch(region, 4 * PAGE)
    m.begin()
    c.madvise(region, 4 * PAGE, MADV_DONTNEED)
    try:
        return m.seen([(region, region + 4 * PAGE)], ("madvise",)), ""
    finally:
        c.munmap(region, 4 * PAGE)


def direct_mremap(c: Libc, m: Measure) -> PathOutcome:
    region = c.map_anonymous(2 * PAGE)
    m.begin()
    moved = c.mremap(region, 2 * PAGE, 64 * PAGE, MREMAP_MAYMOVE)
    try:
        return m.seen([(region, region + 2 * PAGE)], ("mremap",)), ""
    finally:
        c.munmap(moved, 64 * PAGE)


def mmap_fixed(c: Libc, m: Measure) -> PathOutcome:
    region = c.map_anonymous(2 * PAGE)
    m.begin()
    c.map_anonymous(2 * PAGE, address=region, fixed=True)
    try:
        return m.seen([(region, region + 2 * PAGE)], ("mmap_fixed",)), ""
    finally:
        c.munmap(region, 2 * PAGE)


def shmdt(c: Libc, m: Measure) -> PathOutcome:
    try:
        address = c.shm_attach_private(MIB)
    except OSError as exc:
        reason = os.strerror(exc.errno or 0)
        raise NotRunnable(f"SysV shared memory unavailable: {reason}") from exc
    m.begin()
    c.shmdt(address)
    return m.seen([(address, address + MIB)], ("shmdt",)), "length unknown: reported to end"


def _buffer_address(buffer: mmap.mmap) -> int:
    view = ctypes.c_char.from_buffer(buffer)
    try:
        return ctypes.addressof(view)
    finally:
        del view  # releases the buffer export so the map can close/resize


def mmap_module_close(c: Libc, m: Measure) -> PathOutcome:
    mapped = mmap.mmap(-1, MIB)
    address = _buffer_address(mapped)
    m.begin()
    mapped.close()
    return m.seen([(address, address + MIB)], ("munmap",)), ""


def mmap_module_madvise(c: Libc, m: Measure) -> PathOutcome:
    if not hasattr(mmap, "MADV_DONTNEED"):
        raise NotRunnable("this Python's mmap module has no madvise()")
    with mmap.mmap(-1, MIB) as mapped:
        mapped[:PAGE] = b"x" * PAGE
        address = _buffer_address(mapped)
        m.begin()
        mapped.madvise(mmap.MADV_DONTNEED)
        return m.seen([(address, address + MIB)], ("madvise",)), ""


def mmap_module_resize(c: Libc, m: Measure) -> PathOutcome:
    import tempfile  # here, not at import: every session imports this module

    with tempfile.TemporaryFile() as backing:
        backing.truncate(MIB)
        with mmap.mmap(backing.fileno(), MIB) as mapped:
            address = _buffer_address(mapped)
            m.begin()
            try:
                mapped.resize(8 * MIB)
            except (OSError, SystemError, ValueError) as exc:
                raise NotRunnable(f"mmap.resize() is not supported here: {exc}") from exc
            return m.seen([(address, address + MIB)], ("mremap", "munmap")), ""


def obmalloc_arena(c: Libc, m: Measure) -> PathOutcome:
    import sysconfig

    if sysconfig.get_config_var("Py_GIL_DISABLED"):
        raise NotRunnable("free-threaded CPython allocates with mimalloc, not obmalloc arenas")
    if os.environ.get("PYTHONMALLOC", "").startswith("malloc") or sys.flags.dev_mode:
        raise NotRunnable("obmalloc is replaced by PYTHONMALLOC/dev mode")
    hooks = backend()
    if not hooks.is_installed("mmap"):
        raise NotRunnable("needs the mmap hook to see new arenas being mapped")
    # obmalloc fills the free pools of existing arenas first; objects placed
    # there never free a whole arena.  Fill them until a new arena is mapped.
    filler: list[list[tuple[int, int]]] = []
    arenas_mapped = hooks.calls("mmap")
    while hooks.calls("mmap") == arenas_mapped:
        if len(filler) >= 64:
            raise NotRunnable("could not exhaust obmalloc's free pools")
        filler.append([(index, -index) for index in range(1 << 18, (1 << 18) + 10_000)])
    objects = [(index, -index) for index in range(1 << 18, (1 << 18) + 300_000)]
    addresses = sorted(id(item) for item in objects)
    m.begin()
    del objects
    try:
        return m.seen_containing(addresses, ("munmap",)), ""
    finally:
        del filler


def _library_mappings(path: Path) -> list[tuple[int, int]]:
    ranges = []
    with open("/proc/self/maps", encoding="utf-8", errors="replace") as maps:
        for line in maps:
            if line.rstrip().endswith(str(path)):
                start, _, end = line.split()[0].partition("-")
                ranges.append((int(start, 16), int(end, 16)))
    return ranges


def _late_library_and_dlclose(c: Libc, m: Measure) -> tuple[PathOutcome, PathOutcome]:
    import shutil
    import tempfile

    source = probe_library_path()
    if not source.exists():
        raise NotRunnable(f"{source.name} was not built")
    with tempfile.TemporaryDirectory(prefix="pmca-probe-") as directory:
        # A uniquely named copy is a library this process has never loaded.
        copy = Path(directory) / f"libpmca_probe_{os.getpid()}_{id(m)}.so"
        shutil.copyfile(source, copy)
        probe = ctypes.CDLL(str(copy))
        map_unmap = probe.pmca_probe_map_unmap
        map_unmap.restype = ctypes.c_uint64
        map_unmap.argtypes = [ctypes.c_size_t]
        m.begin()
        released = int(map_unmap(MIB))
        late = m.seen([(released, released + MIB)], ("munmap",)), "" if released else "mmap failed"

        mappings = _library_mappings(copy)
        handle = probe._handle
        del probe, map_unmap
        m.begin()
        _ctypes.dlclose(handle)
        if _library_mappings(copy):
            return late, ((), "not run: the library stayed mapped after dlclose")
        unload = m.seen(mappings, _ANY_RELEASE, accept_overflow=False)
        return late, (unload, "ld.so unmaps with its own private munmap")


def raw_syscall(c: Libc, m: Measure) -> PathOutcome:
    region = c.map_anonymous(PAGE)
    m.begin()
    c.raw_munmap(region, PAGE)
    found = m.seen([(region, region + PAGE)], ("munmap",), accept_overflow=False)
    return found, "syscall(SYS_munmap) bypasses libc's munmap entry"


_Path = tuple[str, str, bool, Callable[[Libc, Measure], PathOutcome]]

_PATHS: tuple[_Path, ...] = (
    ("free", "free() of a 64 MiB malloc() (munmap)", True, free_large),
    ("realloc", "realloc() growth of a 40 MiB block (mremap)", True, realloc_growth),
    ("malloc_trim", "malloc_trim() of freed arena blocks (madvise/brk)", True, malloc_trim),
    ("munmap", "ctypes munmap()", True, direct_munmap),
    ("madvise", "ctypes madvise(MADV_DONTNEED)", True, direct_madvise),
    ("mremap", "ctypes mremap(MREMAP_MAYMOVE)", True, direct_mremap),
    ("mmap_fixed", "ctypes mmap(MAP_FIXED) over a mapping", True, mmap_fixed),
    ("shmdt", "shmdt() of a SysV segment", True, shmdt),
    ("mmap_close", "mmap module: close()", True, mmap_module_close),
    ("mmap_madvise", "mmap module: madvise(MADV_DONTNEED)", True, mmap_module_madvise),
    ("mmap_resize", "mmap module: resize() of a file mapping", True, mmap_module_resize),
    ("obmalloc", "CPython obmalloc arena release", True, obmalloc_arena),
    ("raw_syscall", "munmap via syscall(2), as other runtimes do", False, raw_syscall),
)


def _run(name: str, description: str, expected: bool, outcome: PathOutcome) -> PathResult:
    kinds, note = outcome
    if note.startswith("not run:"):
        return PathResult(name, description, expected, None, (), note[len("not run:") :].strip())
    return PathResult(name, description, expected, bool(kinds), kinds, note)


def _attempt(
    name: str, description: str, expected: bool, path: Callable[[], PathOutcome]
) -> PathResult:
    try:
        return _run(name, description, expected, path())
    except NotRunnable as exc:
        return PathResult(name, description, expected, None, (), str(exc))
    except (OSError, MemoryError) as exc:
        return PathResult(name, description, expected, None, (), f"failed to run: {exc}")


@public
def coverage() -> Coverage:
    """Run each release path for real and report whether its event arrived.

    Hooks not yet installed are installed for the run and restored after;
    where libc is already patched by UCX's ucm and libucm is loaded, pmca
    subscribes to ucm's events for the run instead (``sources`` says which
    delivered what; events from ucm have the kind ``vm_unmapped``);
    events are observed through the dispatcher, so no other subscriber
    loses any.  Raises :class:`NativeUnavailable` without a native backend.
    """
    hooks = backend()
    c = libc()
    results: list[PathResult] = []
    with (
        hooks_installed(hooks) as status,
        ucm_for_refused(status) as ucm_state,
        observing(dispatcher()) as measure,
    ):
        for name, description, expected, path in _PATHS:
            results.append(_attempt(name, description, expected, partial(path, c, measure)))
        late_description = "a library loaded after install calls munmap()"
        unload_description = "dlclose() of that library"
        try:
            late, unload = _late_library_and_dlclose(c, measure)
        except NotRunnable as exc:
            results.append(PathResult("late_library", late_description, True, None, (), str(exc)))
            results.append(PathResult("dlclose", unload_description, False, None, (), str(exc)))
        else:
            results.append(_run("late_library", late_description, True, late))
            results.append(_run("dlclose", unload_description, False, unload))
        hook_status = dict(status)
    return Coverage(
        paths=tuple(results), hooks=hook_status, sources=describe_sources(hook_status, ucm_state)
    )
