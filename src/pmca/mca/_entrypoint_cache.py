"""pmca's entry points, kept between processes and checked against what is installed at each start.

Reading every distribution's ``entry_points.txt`` at each start is work that
repeats itself: pmca keeps the ``pmca.*`` entry points it read, with the
state they were read from, in one file per interpreter under the user's
cache directory (``$XDG_CACHE_HOME/pmca``, ``~/.cache/pmca``;
``PMCA_ENTRY_POINT_CACHE`` names another directory, or ``none`` turns it
off). The state is checked at every start, so the kept answer is used only
when a scan would give the same one:

- each directory on ``sys.path``, in order, by inode and modification time:
  a distribution installed, upgraded or removed there creates or removes its
  metadata directory (``*.dist-info``, ``*.egg-info``), which changes it;
- each distribution's ``entry_points.txt`` by inode, modification time and
  size (absent too): rewritten in place, as ``setup.py egg_info`` does;
- where two metadata directories have the same distribution name, each
  directory itself too (which of them counts depends on which has metadata).

A state changed within two seconds of the scan is not trusted to show its
next change (timestamps have a granularity): such an answer is not kept.
Where only ``importlib_metadata`` can read the metadata (a zip or an egg on
the path, a foreign finder) nothing is kept. A cache that cannot be read or
written is no cache: the entry points are read from the metadata.
"""

from __future__ import annotations

import contextlib
import marshal
import os
import sys
import threading
import time

from ._entrypoints import (
    EntryPoint,
    MetadataDirectory,
    metadata_directories,
    read_entry_points,
    standard_finders_only,
)

TYPE_CHECKING = False  # typing.TYPE_CHECKING, without importing typing at each start
if TYPE_CHECKING:
    from typing import Any

__all__ = ["cache_file", "cached_entry_points"]

_FORMAT = 1
_OFF = ("", "0", "none", "off", "no", "false")
_ABSENT = (-1, -1, -1)
#: How long after its last change a file is trusted to keep its state (see :func:`_settled`).
_SETTLE_NS = 2_000_000_000


def cache_file() -> str | None:
    """The file this interpreter's entry points are kept in; ``None`` when turned off."""
    setting = os.environ.get("PMCA_ENTRY_POINT_CACHE")
    if setting is not None:
        if setting.strip().lower() in _OFF:
            return None
        directory = setting
    else:
        base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
        directory = os.path.join(base, "pmca")
    # One file per interpreter (each virtual environment has its own).
    return os.path.join(directory, f"entry-points-{_fnv1a(sys.executable):08x}.marshal")


def _fnv1a(text: str) -> int:
    """A 32-bit FNV-1a hash: stable across processes, without loading ``zlib`` at each start."""
    value = 0x811C9DC5
    for byte in text.encode("utf-8", "surrogateescape"):
        value = ((value ^ byte) * 0x01000193) & 0xFFFFFFFF
    return value


def _state(path: str) -> tuple[int, int, int]:
    try:
        status = os.stat(path)
    except (OSError, ValueError):
        return _ABSENT
    return (status.st_ino, status.st_mtime_ns, status.st_size)


def _path_state() -> tuple[Any, ...] | None:
    """Each ``sys.path`` entry with its directory's state: unchanged, it lists the same names."""
    if not all(isinstance(entry, str) for entry in sys.path):
        return None
    return tuple((entry, _state(entry or ".")) for entry in sys.path)


def _dist_rows(directories: list[MetadataDirectory]) -> tuple[Any, ...]:
    """Each metadata directory with the state of its ``entry_points.txt``, and of the
    directory itself where another one has the same name (which of them counts
    depends on which holds metadata)."""
    names = [dist.normalized_name for dist in directories]
    counts: dict[str, int] = {}
    for name in names:
        counts[name] = counts.get(name, 0) + 1
    return tuple(
        (
            dist.path,
            name,
            _state(os.path.join(dist.path, "entry_points.txt")),
            _state(dist.path) if counts[name] > 1 else None,
        )
        for dist, name in zip(directories, names, strict=True)
    )


def _holds(rows: tuple[Any, ...]) -> bool:
    return all(
        _state(os.path.join(path, "entry_points.txt")) == entry_points
        and (directory is None or _state(path) == directory)
        for path, _, entry_points, directory in rows
    )


def _load(file_path: str, key: tuple[Any, ...]) -> list[EntryPoint] | None:
    try:
        with open(file_path, "rb") as file:
            kept_key, rows, kept = marshal.load(file)
        if kept_key != key or not _holds(rows):
            return None
        dists = {path: MetadataDirectory(path, name) for path, name, _, _ in rows}
        return [EntryPoint(name, value, group, dists[path]) for name, value, group, path in kept]
    except (OSError, EOFError, ValueError, TypeError, KeyError):  # absent, truncated, changed
        return None


def _settled(key: tuple[Any, ...], rows: tuple[Any, ...]) -> bool:
    """Whether no state kept is recent enough to change again unseen.

    A directory or file changed again within the file system's timestamp
    granularity could keep its modification time (and its size): an answer
    read from one changed that recently is not kept, and the next start
    reads the metadata again.
    """
    recent = time.time_ns() - _SETTLE_NS
    states = [state for _, state in key[2]]
    for _, _, entry_points, directory in rows:
        states.append(entry_points)
        if directory is not None:
            states.append(directory)
    return all(state[1] < recent for state in states)


def _store(
    file_path: str, key: tuple[Any, ...], rows: tuple[Any, ...], points: list[EntryPoint]
) -> None:
    if not _settled(key, rows):
        return
    kept = tuple((p.name, p.value, p.group, p.dist.path) for p in points)
    partial = f"{file_path}.{os.getpid()}.{threading.get_ident()}.tmp"  # one per writer
    try:
        os.makedirs(os.path.dirname(file_path), mode=0o700, exist_ok=True)
        with open(partial, "wb") as file:
            marshal.dump((key, rows, kept), file)
        os.replace(partial, file_path)  # readers see the old file or the new one, whole
    except OSError:
        with contextlib.suppress(OSError):
            os.unlink(partial)


def cached_entry_points(prefix: str) -> list[EntryPoint] | None:
    """:func:`read_entry_points` of ``prefix``, from the kept answer while it holds."""
    file_path = cache_file()
    paths = _path_state() if file_path is not None else None
    key = (_FORMAT, prefix, paths)
    if file_path is not None and paths is not None and standard_finders_only():
        kept = _load(file_path, key)
        if kept is not None:
            return kept
    directories = metadata_directories()
    if directories is None:
        return None
    # The state before the read: a change meanwhile makes the next start read again.
    rows = _dist_rows(directories)
    points = read_entry_points(prefix, directories)
    if points is not None and file_path is not None and paths is not None:
        _store(file_path, key, rows, points)
    return points
