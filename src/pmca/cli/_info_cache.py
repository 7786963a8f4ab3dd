"""``pmca info``'s output, kept for the next identical run.

``pmca info`` imports every installed component to register its parameters;
the answer changes only when what it was computed from changes. The output
of a clean run (exit 0, nothing on stderr, no component or framework that
failed to load) is stored with:

- a key that must be equal: pmca's version, the interpreter, the command
  line, the working directory, the whole environment (``PMCA_MCA_*``,
  ``HOME``, ``PATH``...), ``uname`` and ``sys.path``;
- the state (modification time, size, inode; or absence) of every file the
  answer came from: each directory on ``sys.path`` (a distribution installed
  or removed there), each distribution's ``METADATA`` and
  ``entry_points.txt``, the file of every module imported (pmca's own, every
  component's, what they import; noted while the components are loaded, as
  a dso load mode unloads them), every shared object mapped, the parameter
  files and override file (read or missing), the drop-in directories.

A run whose key or any of those states differs is computed afresh (and
stored again). Set ``PMCA_INFO_CACHE`` to a directory to keep the cache
there, or to ``none`` to turn it off; by default it lives in
``$XDG_CACHE_HOME/pmca`` (``~/.cache/pmca``). Only a run as a program (the
``pmca`` script) is cached, and never one writing to a terminal.

This module is imported before anything else of pmca's: it must stay cheap.
"""

from __future__ import annotations

import contextlib
import marshal
import os
import sys
from collections.abc import Iterable, Sequence

from .._version import __version__

TYPE_CHECKING = False  # typing.TYPE_CHECKING, without importing typing on the cached path
if TYPE_CHECKING:
    from typing import Any, TextIO

    #: Strings, numbers and tuples of them: what ``marshal`` stores.
    _Key = tuple[Any, ...]

__all__ = ["Recorder", "cache_directory", "lookup"]

_FORMAT = 1
_OFF = ("", "0", "none", "off", "no", "false")

_State = tuple[int, int, int]


def cache_directory() -> str | None:
    """Where the cache lives, or ``None`` when ``PMCA_INFO_CACHE`` turns it off."""
    setting = os.environ.get("PMCA_INFO_CACHE")
    if setting is not None:
        return None if setting.strip().lower() in _OFF else setting
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return os.path.join(base, "pmca")


def _key(argv: Sequence[str]) -> _Key:
    return (
        _FORMAT,
        __version__,
        sys.version,
        sys.executable,
        tuple(argv),
        os.getcwd(),
        tuple(sorted(os.environ.items())),
        tuple(os.uname()),
        tuple(path if isinstance(path, str) else repr(path) for path in sys.path),
    )


def _path(directory: str, argv: Sequence[str]) -> str:
    import zlib  # not at import: a run with the cache off never names a file

    where = "\0".join([sys.executable, os.getcwd(), *argv])
    name = zlib.crc32(where.encode("utf-8", "surrogateescape"))
    return os.path.join(directory, f"info-{name:08x}.marshal")


def _state(path: str) -> _State:
    try:
        status = os.stat(path)
    except (OSError, ValueError):
        return (-1, -1, -1)
    return (status.st_mtime_ns, status.st_size, status.st_ino)


def lookup(argv: Sequence[str], stdout: TextIO) -> str | None:
    """The stored output of ``pmca <argv>``, if it is still what a run would print."""
    directory = cache_directory()
    if directory is None or stdout.isatty():
        return None
    try:
        with open(_path(directory, argv), "rb") as file:
            stored = marshal.load(file)
    except (OSError, EOFError, ValueError, TypeError):
        return None
    if not isinstance(stored, tuple) or len(stored) != 3 or stored[0] != _key(argv):
        return None
    _, files, text = stored
    if not isinstance(files, tuple) or not isinstance(text, str):
        return None
    for path, state in files:
        if _state(path) != state:
            return None
    return text


def _mapped_files() -> set[str]:
    """Every file this process has mapped: native libraries and extension modules."""
    found: set[str] = set()
    try:
        with open("/proc/self/maps", encoding="utf-8", errors="replace") as maps:
            for line in maps:
                fields = line.split(maxsplit=5)
                if len(fields) == 6 and fields[5].startswith("/"):
                    found.add(fields[5].rstrip("\n").removesuffix(" (deleted)"))
    except OSError:
        pass
    return found


def _distribution_files() -> set[str] | None:
    """Each distribution's metadata files; ``None`` if some are in zips or eggs."""
    from ..mca._entrypoints import metadata_directories

    directories = metadata_directories()
    if directories is None:
        return None
    return {
        os.path.join(dist.path, name)
        for dist in directories
        for name in ("METADATA", "PKG-INFO", "entry_points.txt")
    }


class Recorder:
    """Collects what a ``pmca info`` run depended on, and stores its output if it was clean."""

    def __init__(self, argv: Sequence[str], directory: str) -> None:
        self._argv = tuple(argv)
        self._directory = directory
        self._key = _key(argv)
        self._inputs: set[str] = set()
        self.clean = True
        self.stderr_written = False

    def depends_on(self, paths: Iterable[str]) -> None:
        """Files (read or missing) and directories the answer came from."""
        self._inputs.update(paths)

    def note_modules(self) -> None:
        """The file of every module imported so far: call it while the components are
        loaded, since a dso load mode takes their modules out of ``sys.modules`` again."""
        for module in list(sys.modules.values()):
            path = getattr(module, "__file__", None)
            if isinstance(path, str):
                self._inputs.add(path)

    def store(self, text: str) -> None:
        distributions = _distribution_files()
        if not self.clean or self.stderr_written or distributions is None:
            return
        watched = set(self._inputs) | distributions
        watched.update(entry or "." for entry in sys.path if isinstance(entry, str))
        self.note_modules()
        watched.update(self._inputs)
        watched.update(_mapped_files())
        files = tuple((path, _state(path)) for path in sorted(watched))
        target = _path(self._directory, self._argv)
        partial = f"{target}.{os.getpid()}.tmp"
        try:
            os.makedirs(self._directory, mode=0o700, exist_ok=True)
            with open(partial, "wb") as file:
                marshal.dump((self._key, files, text), file)
            os.replace(partial, target)
        except OSError:
            # A cache that cannot be written is no cache; the run itself succeeded.
            with contextlib.suppress(OSError):
                os.unlink(partial)
