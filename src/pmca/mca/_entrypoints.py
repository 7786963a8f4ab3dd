"""Entry points of the installed distributions, read straight from their metadata directories.

``importlib_metadata`` imports some forty modules (``email``, ``zipfile``,
``tempfile``, ``importlib.resources``...) before it reads a single
``entry_points.txt``: more than everything else a session costs. Where every
distribution is a ``.dist-info``/``.egg-info`` directory in a directory on
``sys.path`` (every virtual environment and ``pip install``), this module reads
those files itself, in ``importlib_metadata``'s order and with its rules: one
distribution per normalized name, the first on the path, those with metadata
before those without. Any other layout (a zip file or an ``.egg`` on the path,
a custom distribution finder on ``sys.meta_path``) is left to
``importlib_metadata``: :func:`read_entry_points` returns ``None``.
"""

from __future__ import annotations

import importlib
import os
import re
import sys
from collections.abc import Iterable
from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    from pathlib import Path

__all__ = [
    "DistributionLike",
    "EntryPoint",
    "EntryPointLike",
    "MetadataDirectory",
    "installed_files",
    "metadata_directories",
    "name_and_version",
    "read_entry_points",
    "standard_finders_only",
]

_METADATA_SUFFIXES = (".dist-info", ".egg-info")
#: ``importlib_metadata.EntryPoint.pattern``: ``module[:attr.attr][ [extras]]``.
_REFERENCE = re.compile(r"(?P<module>[\w.]+)\s*(:\s*(?P<attr>[\w.]+)\s*)?((?P<extras>\[.*\])\s*)?$")
_SEPARATORS = re.compile(r"[-_.]+")
#: From this ``importlib_metadata`` on, ``entry_points()`` lists the distributions
#: with metadata before those without; earlier ones keep ``sys.path`` order.
_PREFERS_VALID_FROM = (10, 1)


class DistributionLike(Protocol):
    """What pmca asks of a distribution (``importlib_metadata.Distribution`` has it)."""

    @property
    def name(self) -> str: ...

    @property
    def version(self) -> str: ...

    def read_text(self, filename: str) -> str | None: ...


class EntryPointLike(Protocol):
    """What pmca asks of an entry point (``importlib_metadata.EntryPoint`` has it)."""

    @property
    def name(self) -> str: ...

    @property
    def value(self) -> str: ...

    @property
    def group(self) -> str: ...

    def load(self) -> Any: ...


def name_and_version(dist: DistributionLike) -> dict[str, str]:
    """``Name`` and ``Version`` from a distribution's metadata, as far as it has them.

    Read from the header lines: ``Distribution.name`` parses the whole file
    with the ``email`` package, which ``pmca info`` would import for this alone.
    """
    text = dist.read_text("METADATA") or dist.read_text("PKG-INFO") or ""
    fields: dict[str, str] = {}
    for line in text.splitlines():
        if not line.strip():
            break  # the headers end at the first blank line
        key, colon, value = line.partition(":")
        if colon and key in ("Name", "Version"):
            fields.setdefault(key, value.strip())
    return fields


def normalize(name: str) -> str:
    """PEP 503 normalization, dashes as underscores (``importlib_metadata.Prepared``)."""
    return _SEPARATORS.sub("-", name).lower().replace("-", "_")


class MetadataDirectory:
    """One installed distribution: its ``.dist-info`` or ``.egg-info`` directory."""

    __slots__ = ("_headers", "_normalized", "path")

    def __init__(self, path: str, normalized: str | None = None) -> None:
        self.path = path
        self._headers: dict[str, str] | None = None
        self._normalized = normalized

    def __repr__(self) -> str:
        return f"<distribution {self.path}>"

    def read_text(self, filename: str) -> str | None:
        try:
            with open(os.path.join(self.path, filename), encoding="utf-8") as file:
                return file.read()
        except (FileNotFoundError, IsADirectoryError, NotADirectoryError, PermissionError):
            return None

    def has_metadata(self) -> bool:
        """``importlib_metadata`` prefers these over the same name without metadata."""
        return (
            os.path.exists(os.path.join(self.path, "METADATA"))
            or os.path.exists(os.path.join(self.path, "PKG-INFO"))
            or os.path.isfile(self.path)
        )

    def _header(self, key: str) -> str:
        if self._headers is None:
            self._headers = name_and_version(self)
        return self._headers.get(key, "")

    @property
    def name(self) -> str:
        return self._header("Name")

    @property
    def version(self) -> str:
        return self._header("Version")

    @property
    def normalized_name(self) -> str:
        """From the directory name where it tells, as ``importlib_metadata`` does."""
        if self._normalized is None:
            stem, suffix = os.path.splitext(os.path.basename(self.path))
            if suffix in _METADATA_SUFFIXES:
                self._normalized = normalize(stem.partition("-")[0])
            else:
                self._normalized = normalize(self.name)
        return self._normalized

    def read_entry_points_text(self) -> str | None:
        """``entry_points.txt``, read in binary: every distribution's, at each scan."""
        try:
            with open(os.path.join(self.path, "entry_points.txt"), "rb") as file:
                return file.read().decode("utf-8")
        except (FileNotFoundError, IsADirectoryError, NotADirectoryError, PermissionError):
            return None


class EntryPoint:
    """``name = value`` in group ``group`` of ``dist``'s ``entry_points.txt``."""

    __slots__ = ("dist", "group", "name", "value")

    def __init__(self, name: str, value: str, group: str, dist: MetadataDirectory) -> None:
        self.name = name
        self.value = value
        self.group = group
        self.dist = dist

    def __repr__(self) -> str:
        return f"EntryPoint(name={self.name!r}, value={self.value!r}, group={self.group!r})"

    def load(self) -> Any:
        """The module, or the object that ``module:attr.attr`` names."""
        match = _REFERENCE.match(self.value)
        if match is None:
            raise ValueError(
                "Invalid object reference. See https://packaging.python.org"
                "/en/latest/specifications/entry-points/#data-model",
                self.value,
            )
        obj: Any = importlib.import_module(match["module"])
        for attribute in filter(None, (match["attr"] or "").split(".")):
            obj = getattr(obj, attribute)
        return obj


def standard_finders_only() -> bool:
    """Whether only the path-based finders of the standard library and
    ``importlib_metadata`` can find distributions (anything else may know more)."""
    from importlib.machinery import PathFinder

    for finder in sys.meta_path:
        if getattr(finder, "find_distributions", None) is None or finder is PathFinder:
            continue
        kind = finder if isinstance(finder, type) else type(finder)
        if (kind.__module__, kind.__qualname__) != ("importlib_metadata", "MetadataPathFinder"):
            return False
    return True


def _directories(path: Iterable[object]) -> list[MetadataDirectory] | None:
    """Every metadata directory on ``path``, in ``importlib_metadata``'s order."""
    found: list[MetadataDirectory] = []
    for entry in path:
        if not isinstance(entry, str):
            return None
        root = entry or "."
        try:
            children = os.listdir(root)
        except OSError:
            if os.path.isfile(root):
                return None  # a zip file: importlib_metadata reads those
            continue  # a directory that does not exist holds nothing
        if os.path.basename(root).lower().endswith(".egg"):
            return None  # an egg's legacy EGG-INFO
        by_name: dict[str, list[str]] = {}
        for child in children:
            low = child.lower()
            if low.endswith(_METADATA_SUFFIXES):
                name = normalize(low.rpartition(".")[0].partition("-")[0])
                by_name.setdefault(name, []).append(child)
        for name, children_of_name in by_name.items():
            for child in children_of_name:
                # The same name importlib_metadata derives from the stem, when the
                # suffix is spelt exactly; otherwise it comes from the metadata.
                exact = child.endswith(_METADATA_SUFFIXES)
                found.append(MetadataDirectory(os.path.join(entry, child), name if exact else None))
    return found


def metadata_directories() -> list[MetadataDirectory] | None:
    """Every metadata directory on ``sys.path``; ``None`` with a zip or an egg on
    it, or a distribution finder that may know of others."""
    if not standard_finders_only():
        return None
    return _directories(sys.path)


def _parse(text: str, prefix: str, dist: MetadataDirectory) -> Iterable[EntryPoint]:
    group: str | None = None
    for raw in text.splitlines():
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        if line.startswith("[") and line.endswith("]"):
            group = line.strip("[]")
            continue
        name, equals, value = line.partition("=")
        if group is not None and equals and group.startswith(prefix):
            yield EntryPoint(name.strip(), value.strip(), group, dist)


def _prefers_valid(directories: list[MetadataDirectory]) -> bool | None:
    """Whether the installed ``importlib_metadata`` lists distributions with
    metadata first (10.1 on; on Python 3.10 pip installs 9.x, which does not);
    ``None`` when its version cannot be told."""
    for directory in directories:
        if directory.normalized_name == "importlib_metadata" and directory.has_metadata():
            release = re.match(r"(\d+)\.(\d+)", directory.version)
            if release is None:
                return None
            return (int(release[1]), int(release[2])) >= _PREFERS_VALID_FROM
    return None


def read_entry_points(
    prefix: str, directories: list[MetadataDirectory] | None = None
) -> list[EntryPoint] | None:
    """The entry points of every group starting with ``prefix``, as
    ``importlib_metadata.entry_points()`` lists them; ``None`` where only
    ``importlib_metadata`` can read the installed metadata. ``directories``:
    :func:`metadata_directories`, when the caller has listed them already."""
    if directories is None:
        directories = metadata_directories()
    if directories is None:
        return None
    prefers_valid = _prefers_valid(directories)
    if prefers_valid is None:
        return None
    preferred = directories
    if prefers_valid:
        valid = [d.has_metadata() for d in directories]
        preferred = [d for d, ok in zip(directories, valid, strict=True) if ok]
        preferred.extend(d for d, ok in zip(directories, valid, strict=True) if not ok)
    chosen: set[str] = set()
    points: list[EntryPoint] = []
    for dist in preferred:
        key = dist.normalized_name
        if key in chosen:
            continue
        chosen.add(key)
        text = dist.read_entry_points_text()
        if text and prefix in text:
            points.extend(_parse(text, prefix, dist))
    return points


def installed_files(name: str) -> Iterable[Path] | None:
    """The files distribution ``name`` installed, as absolute paths; ``None`` when
    it is not installed. Read from its ``RECORD`` where every distribution is a
    directory on ``sys.path``: ``importlib_metadata`` would import some forty
    modules into every process that looks for a library an MPI wheel ships."""
    import csv  # not at import: only a search for a wheel's library reads a RECORD
    from pathlib import Path

    directories = metadata_directories()
    if directories is None:
        import importlib_metadata  # a zip, an egg or a foreign finder on the path

        try:
            distribution = importlib_metadata.distribution(name)
        except importlib_metadata.PackageNotFoundError:
            return None
        return (Path(str(f.locate())) for f in distribution.files or ())
    wanted = normalize(name)
    for directory in directories:
        if directory.normalized_name == wanted and directory.has_metadata():
            record = directory.read_text("RECORD")
            root = Path(directory.path).parent
            rows = csv.reader((record or "").splitlines())
            return (root / row[0] for row in rows if row)
    return None
