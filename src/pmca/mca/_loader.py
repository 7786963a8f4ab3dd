"""Loading and unloading components: load modes, Python modules, native libraries.

``static`` components are imported once per process and stay resident, with
their native libraries. ``dso`` components are imported afresh at framework
open and really unloaded at the last close: their modules leave
``sys.modules`` and the native libraries they opened through
:func:`load_library` are ``dlclose``d, as Open MPI does with
``mca_<fw>_<comp>.so``.
"""

from __future__ import annotations

import _ctypes
import ctypes
import importlib
import os
import sys
from collections.abc import Callable
from typing import TYPE_CHECKING, Literal

from attrs import define, field

from .._forksafe import short_lock
from .._public import public
from .._records import FrozenValue, Record
from ._errors import LibraryError, SelectionError

if TYPE_CHECKING:
    from pathlib import Path

LoadMode = Literal["static", "dso"]

#: Undoes what a library still owns before it is unloaded; returns what it did.
UnloadGuard = Callable[[], str | None]


#: What ``mca_base_component_dso`` and ``mca_base_component_static`` accept.
LOAD_LIST_VALID = (
    "'all', 'none', or a comma-separated list of framework names ('memory') and "
    "framework-component pairs ('memory-patcher')"
)

_BOOLEAN_WORDS = frozenset(
    {"1", "0", "yes", "no", "y", "n", "true", "false", "t", "f", "enabled", "disabled"}
)


def load_list_item_problem(item: str) -> str | None:
    """Why ``item`` is not a ``fw`` or ``fw-comp`` item of a load-mode list, or ``None``."""
    from ._names import COMPONENT_NAME, FRAMEWORK_NAME

    if item.lower() in ("all", "none"):
        if item in ("all", "none"):
            return f"{item!r} must be the whole value, not an item of a list"
        return f"{item!r} is not a keyword; did you mean {item.lower()!r}?"
    if item.lower() in _BOOLEAN_WORDS:
        return f"{item!r} is not a framework name (this is not a boolean: use 'all' or 'none')"
    for separator in ("/", ":", "."):
        framework, found, component = item.partition(separator)
        if found:
            return f"{item!r} uses {separator!r}; a component is named '{framework}-{component}'"
    framework, dash, component = item.partition("-")
    if dash and (
        not FRAMEWORK_NAME.fullmatch(framework) or not COMPONENT_NAME.fullmatch(component)
    ):
        return f"{item!r} is not a 'framework-component' pair"
    if not dash and not FRAMEWORK_NAME.fullmatch(item):
        head, underscore, tail = item.partition("_")
        if underscore and FRAMEWORK_NAME.fullmatch(head) and COMPONENT_NAME.fullmatch(tail):
            return f"{item!r} is not a framework name; did you mean '{head}-{tail}'?"
        return f"{item!r} is not a framework name (framework names match [a-z][a-z0-9]*)"
    return None


def load_list_problem(text: str) -> str | None:
    """Why ``text`` is not a valid load-mode list, or ``None``."""
    text = text.strip()
    if text in ("", "none", "all"):
        return None
    for item in (part.strip() for part in text.split(",")):
        problem = "empty item" if not item else load_list_item_problem(item)
        if problem is not None:
            return f"invalid item {item!r}: {problem}"
    return None


@define(frozen=True, eq=False, repr=False)
class LoadModeSpec(FrozenValue):
    """A parsed ``mca_base_component_dso`` or ``mca_base_component_static`` value."""

    everything: bool = False
    frameworks: frozenset[str] = frozenset()
    components: frozenset[tuple[str, str]] = frozenset()

    @classmethod
    def parse(cls, value: object, *, parameter: str) -> LoadModeSpec:
        """Parse a load-mode list; a malformed one raises :class:`SelectionError`."""
        if isinstance(value, (list, tuple)):
            value = ",".join(str(v) for v in value)
        text = str(value or "").strip()
        if text in ("", "none"):
            return cls()
        if text == "all":
            return cls(everything=True)
        problem = load_list_problem(text)
        if problem is not None:
            raise SelectionError(
                f"parameter {parameter!r} = {text!r}: {problem} (valid values: {LOAD_LIST_VALID})"
            )
        frameworks: set[str] = set()
        components: set[tuple[str, str]] = set()
        for item in (part.strip() for part in text.split(",")):
            framework, dash, component = item.partition("-")
            if dash:
                components.add((framework, component))
            else:
                frameworks.add(framework)
        return cls(False, frozenset(frameworks), frozenset(components))

    def names(self) -> tuple[set[str], set[tuple[str, str]]]:
        """The frameworks and ``(framework, component)`` pairs the list names."""
        return set(self.frameworks), set(self.components)


def choose_load_mode(
    framework: str,
    component: str,
    *,
    dso: LoadModeSpec,
    static: LoadModeSpec,
    forced_static: bool,
) -> LoadMode:
    """Open MPI's ``--enable-mca-dso``/``--enable-mca-static`` rules.

    Component level beats framework level beats ``all``; at the same level
    static wins; with nothing said, everything is static.
    """
    if forced_static:
        return "static"
    key = (framework, component)
    for static_hit, dso_hit in (
        (key in static.components, key in dso.components),
        (framework in static.frameworks, framework in dso.frameworks),
        (static.everything, dso.everything),
    ):
        if static_hit:
            return "static"
        if dso_hit:
            return "dso"
    return "static"


def purge_modules(root: str) -> list[str]:
    """Remove ``root`` and its submodules from ``sys.modules`` and its parent."""
    doomed = [name for name in list(sys.modules) if name == root or name.startswith(root + ".")]
    for name in doomed:
        module = sys.modules.pop(name, None)
        parent_name, _, leaf = name.rpartition(".")
        parent = sys.modules.get(parent_name) if parent_name else None
        if parent is not None and module is not None and getattr(parent, leaf, None) is module:
            delattr(parent, leaf)
    invalidate_import_caches()
    return doomed


#: Whether ``importlib.invalidate_caches()`` imports ``importlib.metadata`` (3.13 on).
_INVALIDATE_IMPORTS_METADATA: bool = sys.version_info >= (3, 13)


def invalidate_import_caches() -> None:
    """``importlib.invalidate_caches()`` without importing ``importlib.metadata``.

    From Python 3.13 on, the path finder's ``invalidate_caches`` imports
    ``importlib.metadata`` (``email``, ``zipfile``, ``tempfile``... some
    forty modules) only to reset that module's own cache, which pmca (it
    reads entry points itself) never filled. Where it is loaded already, or
    before 3.13, the plain call is used. Otherwise the finders are reset one
    by one: the other meta path finders, then every path entry finder (the
    directory listings a re-import of a purged module must not trust);
    namespace packages' cached portions are not recomputed.
    """
    if not _INVALIDATE_IMPORTS_METADATA or "importlib.metadata" in sys.modules:
        importlib.invalidate_caches()
        return
    from importlib.machinery import PathFinder

    for finder in sys.meta_path:
        if finder is not PathFinder and hasattr(finder, "invalidate_caches"):
            finder.invalidate_caches()
    for name, entry in list(sys.path_importer_cache.items()):
        if entry is None or not os.path.isabs(name):
            del sys.path_importer_cache[name]  # as the path finder does: cwd may have moved
        elif hasattr(entry, "invalidate_caches"):
            entry.invalidate_caches()


@public
@define(eq=False, repr=False)
class NativeLibrary(Record):
    """A shared library opened through pmca's loader on behalf of a component."""

    #: The library's resolved path, as given to ``dlopen``.
    file: str
    owner: str
    cdll: ctypes.CDLL
    resident: bool
    #: Called before ``dlclose``; each returns a message (or ``None``) saying
    #: what it had to undo first, e.g. live patches it restored.
    before_unload: list[UnloadGuard] = field(factory=list)

    @property
    def handle(self) -> int:
        return int(self.cdll._handle)

    @property
    def path(self) -> Path:
        """:attr:`file` as a :class:`pathlib.Path`."""
        from pathlib import Path

        return Path(self.file)


_resident_lock = short_lock()
_resident: dict[str, NativeLibrary] = {}


def open_library(path: str | os.PathLike[str], *, owner: str, resident: bool) -> NativeLibrary:
    """``dlopen`` a library for a component.

    ``path`` is a ``str`` or any path-like object (a :class:`pathlib.Path`).
    Resident (static-mode) libraries are opened once per process and shared;
    the others get their own handle, closed by :func:`close_library`.
    """
    resolved = os.path.realpath(path)
    if resident:
        with _resident_lock:
            existing = _resident.get(resolved)
            if existing is not None:
                return existing
    try:
        cdll = ctypes.CDLL(resolved, mode=ctypes.RTLD_LOCAL)
    except OSError as exc:
        raise LibraryError(f"{owner}: cannot load native library {resolved}: {exc}") from exc
    library = NativeLibrary(resolved, owner, cdll, resident)
    if resident:
        with _resident_lock:
            library = _resident.setdefault(resolved, library)
    return library


def run_unload_guards(guards: list[UnloadGuard]) -> tuple[list[str], list[BaseException]]:
    """Run every guard, last added first; one failing never stops the others.

    Returns what the guards reported and the errors they raised.
    """
    notes: list[str] = []
    failures: list[BaseException] = []
    for guard in reversed(guards):
        try:
            note = guard()
        except BaseException as exc:  # the caller re-raises a KeyboardInterrupt after
            failures.append(exc)
        else:
            if note:
                notes.append(note)
    return notes, failures


def close_library(library: NativeLibrary, *, quarantine: bool = True) -> list[str]:
    """Run the library's unload guards, ``dlclose`` it, quarantine its addresses.

    Returns what the guards reported. A resident library is never closed.
    ``quarantine=False`` (``mca_base_component_quarantine=false``) leaves the
    range free for the next library, as a plain ``dlclose`` does.
    """
    if library.resident:
        return []
    notes, failures = run_unload_guards(library.before_unload)
    library.before_unload.clear()
    span = _mapped_span(library.file)
    _ctypes.dlclose(library.handle)
    if span is not None and quarantine:
        _QUARANTINE.reserve(*span, library=library.file)
    for failure in failures:
        if not isinstance(failure, Exception):
            raise failure  # KeyboardInterrupt & co. stay what they are
    if failures:
        raise LibraryError(
            f"{library.owner}: unload guard(s) of {library.file} failed: "
            + "; ".join(repr(f) for f in failures)
        ) from failures[0]
    return notes


def _mapped_span(text: str) -> tuple[int, int] | None:
    """The address range ``[start, end)`` the loaded library at path ``text`` occupies."""
    starts: list[int] = []
    ends: list[int] = []
    try:
        with open("/proc/self/maps", encoding="utf-8") as maps_file:
            maps = maps_file.read()
    except OSError:
        return None
    for line in maps.splitlines():
        if line.endswith(text) and line.split(None, 5)[-1] == text:
            start, _, end = line.split(None, 1)[0].partition("-")
            starts.append(int(start, 16))
            ends.append(int(end, 16))
    return (min(starts), max(ends)) if starts else None


class _Quarantine:
    """Address ranges of unloaded libraries, reserved inaccessible.

    After ``dlclose`` the next library (often the same one, reloaded) tends
    to be mapped at the very same address, so a stale pointer into the old
    one silently runs the new one's code over its fresh state. Reserving the
    range ``PROT_NONE`` makes such a pointer fault at once, where it is used
    (Open MPI's #13021 was exactly such a pointer). It is a net, not a
    prevention: the stale pointer still crashes, just at its first use and
    never by running someone else's code. Only address space is
    spent; the oldest reservations are released past a cap, which bounds
    the bookkeeping of a process that loads and unloads forever.
    """

    CAP = 256

    def __init__(self) -> None:
        self._lock = short_lock()
        self.ranges: list[tuple[int, int, str]] = []

    def reserve(self, start: int, end: int, *, library: str) -> bool:
        from .._libc import (
            MAP_ANONYMOUS,
            MAP_FIXED_NOREPLACE,
            MAP_NORESERVE,
            MAP_PRIVATE,
            PROT_NONE,
            libc,
        )

        if _mapped_span(library) is not None:
            return False  # someone else still holds the library open
        flags = MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE | MAP_FIXED_NOREPLACE
        with self._lock:
            try:
                address = libc().mmap(start, end - start, PROT_NONE, flags)
            except OSError:
                return False  # raced: something else is mapped there already
            if address != start:  # a kernel too old to know NOREPLACE
                libc().munmap(address, end - start)
                return False
            self.ranges.append((start, end, library))
            while len(self.ranges) > self.CAP:
                old_start, old_end, _ = self.ranges.pop(0)
                libc().munmap(old_start, old_end - old_start)
        return True

    def covers(self, address: int) -> Path | None:
        """The unloaded library whose range holds ``address``, if quarantined."""
        with self._lock:
            found = next((lib for start, end, lib in self.ranges if start <= address < end), None)
        if found is None:
            return None
        from pathlib import Path

        return Path(found)


_QUARANTINE = _Quarantine()


def quarantined(address: int) -> Path | None:
    """Which unloaded library the address belonged to, if pmca quarantined it."""
    return _QUARANTINE.covers(address)
