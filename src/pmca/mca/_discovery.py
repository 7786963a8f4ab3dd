"""Finding components without importing them.

Three places hold components: a framework's static table (built-ins), the
``pmca.<framework>`` entry-point group (third-party distributions) and the
drop-in directories of ``mca_base_component_path``. Discovery reads only
metadata and file names, so that the selection parameter can rule a component
out before a single line of it runs.
"""

from __future__ import annotations

import errno
import importlib
import os
import sys
import threading
from collections.abc import Iterable
from types import ModuleType
from typing import TYPE_CHECKING, Literal

from attrs import define, field

from .._records import Record, Value
from ._entrypoint_cache import cached_entry_points
from ._entrypoints import DistributionLike, EntryPointLike, name_and_version
from ._errors import ComponentError
from ._framework import Framework
from ._names import COMPONENT_NAME

if TYPE_CHECKING:
    from pathlib import Path

Origin = Literal["static", "entry point", "drop-in"]

#: When two places offer the same component name, the first origin wins.
ORIGIN_PRECEDENCE: tuple[Origin, ...] = ("static", "entry point", "drop-in")


@define(eq=False, repr=False)
class Candidate(Record):
    """A component that was found but not imported."""

    framework: str
    name: str
    origin: Origin
    target: str
    entry_point: EntryPointLike | None = None
    path: Path | None = None
    #: Known to load statically before import (declared in a static table).
    force_static: bool = False
    _distribution: str | None = field(default=None, alias="distribution")

    @property
    def distribution(self) -> str | None:
        """``name version`` of the distribution that provides it, if any."""
        if self._distribution is None and self.entry_point is not None:
            self._distribution = distribution_label(self.entry_point)
        return self._distribution

    @property
    def location(self) -> str:
        """Where the component came from, for messages and ``pmca info``."""
        if self.origin == "static":
            return f"built-in ({self.target})"
        if self.origin == "entry point":
            where = f"entry point pmca.{self.framework}:{self.name} = {self.target}"
            dist = self.distribution
            return f"{where} (distribution {dist})" if dist else where
        return f"drop-in {self.path}"

    @property
    def module_root(self) -> str:
        """The module (and its submodules) a dso load imports afresh and unloads."""
        if self.origin == "drop-in":
            return self.target
        module = self.target.partition(":")[0]
        if self.origin == "entry point":
            top = module.partition(".")[0]
            if top != "pmca" and top not in sys.modules:
                return top
        return module

    def load(self) -> object:
        """Import the component's module and return the object it names."""
        if self.origin == "drop-in":
            assert self.path is not None
            return _component_in(_import_drop_in(self.target, self.path), self)
        module_name, _, attribute = self.target.partition(":")
        module = importlib.import_module(module_name)
        if not attribute:
            return _component_in(module, self)
        obj: object = module
        for part in attribute.split("."):
            obj = getattr(obj, part)
        return obj


def distribution_label(entry_point: EntryPointLike) -> str | None:
    """``name version`` of the distribution behind an entry point, if known."""
    dist: DistributionLike | None = getattr(entry_point, "dist", None)
    if dist is None:
        return None
    fields = name_and_version(dist)
    if "Name" in fields and "Version" in fields:
        return f"{fields['Name']} {fields['Version']}"
    return f"{dist.name} {dist.version}"


def _import_drop_in(module_name: str, path: str | os.PathLike[str]) -> ModuleType:
    """Import the drop-in file or package directory at ``path`` (a ``str`` or a path)."""
    import importlib.util  # only drop-ins need it: most starts have none

    package = os.path.isdir(path)
    location = os.path.join(path, "__init__.py") if package else os.fspath(path)
    spec = importlib.util.spec_from_file_location(
        module_name,
        location,
        submodule_search_locations=[os.fspath(path)] if package else None,
    )
    if spec is None or spec.loader is None:
        raise ComponentError(f"cannot import drop-in component file {location}")
    module = importlib.util.module_from_spec(spec)
    sys.modules[module_name] = module
    try:
        spec.loader.exec_module(module)
    except BaseException:
        sys.modules.pop(module_name, None)
        raise
    return module


def _component_in(module: ModuleType, candidate: Candidate) -> object:
    """A module's ``component`` attribute, else its one component class."""
    from ._component import Component

    explicit = getattr(module, "component", None)
    if explicit is not None:
        return explicit
    found = [
        value
        for value in vars(module).values()
        if isinstance(value, type)
        and issubclass(value, Component)
        and value.__module__ == module.__name__
    ]
    if len(found) != 1:
        raise ComponentError(
            f"{candidate.location}: expected a module attribute 'component' or exactly one "
            f"pmca.Component subclass, found {len(found)}"
        )
    return found[0]


def static_candidates(framework: Framework) -> list[Candidate]:
    return [
        Candidate(framework.name, ref.name, "static", ref.target, force_static=ref.force_static)
        for ref in framework.static_components
    ]


class EntryPointIndex:
    """Every ``pmca.*`` entry point, read in one pass over the installed metadata.

    ``importlib.metadata`` reads every distribution's entry points on each
    call, whatever the group, so pmca scans once and answers from memory
    until ``sys.path`` changes: another entry, or a directory on it whose
    modification time moved (a distribution installed or removed there).
    Between processes the scan's answer is kept on disk and checked against
    the installed metadata at each start (:mod:`._entrypoint_cache`).
    """

    def __init__(self, points: Iterable[EntryPointLike]) -> None:
        self._groups: dict[str, list[EntryPointLike]] = {}
        for point in points:
            if point.group.startswith("pmca."):
                self._groups.setdefault(point.group, []).append(point)

    @classmethod
    def scan(cls) -> EntryPointIndex:
        """The index of the installed metadata, reused while ``sys.path`` is unchanged."""
        global _scanned
        key = _path_state()
        with _scan_lock:
            if _scanned is not None and _scanned[0] == key:
                return _scanned[1]
        points: Iterable[EntryPointLike] | None = cached_entry_points("pmca.")
        if points is None:
            import importlib_metadata

            points = importlib_metadata.entry_points()
        index = cls(points)
        with _scan_lock:
            _scanned = (key, index)
        return index

    def group(self, name: str) -> list[EntryPointLike]:
        return list(self._groups.get(name, ()))


_PathState = tuple[tuple[str, int], ...]
_scan_lock = threading.Lock()
_scanned: tuple[_PathState, EntryPointIndex] | None = None


def _path_state() -> _PathState:
    """``sys.path`` with each entry's modification time (``-1``: not a directory)."""
    state: list[tuple[str, int]] = []
    for entry in sys.path:
        try:
            mtime = os.stat(entry or ".").st_mtime_ns
        except (OSError, TypeError, ValueError):
            mtime = -1
        state.append((entry, mtime))
    return tuple(state)


def entry_point_candidates(framework: str, index: EntryPointIndex) -> list[Candidate]:
    return [
        Candidate(framework, ep.name, "entry point", ep.value, entry_point=ep)
        for ep in index.group(f"pmca.{framework}")
    ]


#: What makes a ``mca_base_component_path`` entry no directory rather than an error.
_NOT_A_DIRECTORY = frozenset({errno.ENOENT, errno.ENOTDIR, errno.EBADF, errno.ELOOP})


def drop_in_candidates(framework: str, directories: Iterable[str]) -> list[Candidate]:
    prefix = f"pmca_{framework}_"
    found: list[Candidate] = []
    for directory in directories:
        base = os.path.expanduser(directory)
        try:
            with os.scandir(base) as scan:
                entries = sorted(scan, key=lambda entry: entry.name)
        except OSError as exc:
            if exc.errno in _NOT_A_DIRECTORY:
                continue
            raise
        for entry in entries:
            is_file = entry.is_file()
            is_package = entry.is_dir()
            is_module = is_file and len(entry.name) > 3 and entry.name.endswith(".py")
            stem = entry.name[:-3] if is_module else entry.name
            if not stem.startswith(prefix) or (
                is_package and not os.path.exists(os.path.join(entry.path, "__init__.py"))
            ):
                continue
            if is_file and not is_module:
                continue
            name = stem[len(prefix) :]
            if COMPONENT_NAME.fullmatch(name):
                from pathlib import Path  # only for a drop-in found: a session seldom has one

                found.append(
                    Candidate(framework, name, "drop-in", stem, path=Path(base, entry.name))
                )
    return found


@define(eq=False, repr=False)
class Discovered(Value):
    """The components of one framework, one per name, plus the shadowed ones."""

    candidates: dict[str, Candidate]
    shadowed: list[Candidate]


def discover_components(
    framework: Framework, component_path: Iterable[str], index: EntryPointIndex
) -> Discovered:
    """Every component of ``framework``, by name; nothing is imported."""
    chosen: dict[str, Candidate] = {}
    shadowed: list[Candidate] = []
    for candidate in [
        *static_candidates(framework),
        *entry_point_candidates(framework.name, index),
        *drop_in_candidates(framework.name, component_path),
    ]:
        if candidate.name in chosen:
            shadowed.append(candidate)
        else:
            chosen[candidate.name] = candidate
    return Discovered(chosen, shadowed)
