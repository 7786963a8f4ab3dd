"""How this copy of pmca was built: compiler, C library, and what its native libraries need.

``setup.py`` records the compiler and the glibc it built against in
``_build_info.json`` beside this module, with the libraries it built. The
glibc the libraries *need* is
read from the libraries themselves (the ELF version-needs section, the
GLIBC_x.y versions their symbol references carry), so it is true of the
files installed, whoever built them.
"""

from __future__ import annotations

import ast
import os
import struct

from attrs import frozen

TYPE_CHECKING = False  # typing.TYPE_CHECKING, without importing typing for it
if TYPE_CHECKING:
    from pathlib import Path

__all__ = ["BuildInfo", "build_info", "glibc_needed", "native_libraries"]

#: ``str`` paths: ``pmca info`` shows the build without importing pathlib.
_PACKAGE = os.path.dirname(os.path.realpath(__file__))
_RECORD = os.path.join(_PACKAGE, "_build_info.json")

_SHT_GNU_VERNEED = 0x6FFFFFFE


@frozen
class BuildInfo:
    """``compiler`` and ``glibc`` as recorded at build time (None: not recorded);
    ``glibc_needed``: the newest GLIBC symbol version any installed library references."""

    compiler: str | None
    glibc: str | None
    glibc_needed: str | None
    libraries: tuple[str, ...]

    def summary(self) -> str:
        """One line for ``pmca --version``."""
        if self.compiler is None:
            built = "native libraries not built by setup.py"
        else:
            built = f"built with {self.compiler}"
            if self.glibc:
                built += f" against glibc {self.glibc}"
        if self.glibc_needed:
            built += f"; needs glibc >= {self.glibc_needed}"
        return built


def _library_files() -> list[str]:
    recorded = _recorded().get("libraries")
    if isinstance(recorded, list):
        paths = (os.path.join(_PACKAGE, str(name)) for name in recorded)
        return [path for path in paths if os.path.isfile(path)]
    return sorted(
        os.path.join(directory, name)
        for directory, _, names in os.walk(_PACKAGE)
        for name in names
        if name.startswith("lib") and name.endswith(".so")
    )


def native_libraries() -> list[Path]:
    """The package's ``lib*.so`` files: those the build recorded, else every one found."""
    from pathlib import Path

    return [Path(path) for path in _library_files()]


def _version_needs(library: str | os.PathLike[str]) -> list[str]:
    """The version names (``GLIBC_2.17``...) an ELF64 little-endian file needs.

    Reads the headers and the two sections concerned, not the whole file.
    """
    with open(library, "rb") as stream:
        header = stream.read(64)
        if header[:4] != b"\x7fELF" or header[4] != 2 or header[5] != 1:
            return []
        (shoff,) = struct.unpack_from("<Q", header, 0x28)
        shentsize, shnum = struct.unpack_from("<HH", header, 0x3A)
        stream.seek(shoff)
        table = stream.read(shentsize * shnum)
        sections = [
            struct.unpack_from("<IIQQQQIIQQ", table, index * shentsize) for index in range(shnum)
        ]

        def read(section: tuple[int, ...]) -> bytes:
            stream.seek(section[4])
            return stream.read(section[5])

        names: list[str] = []
        for section in sections:
            if section[1] != _SHT_GNU_VERNEED:
                continue
            needs, strings = read(section), read(sections[section[6]])
            entry = 0
            for _ in range(section[7]):
                _version, count, _file, aux, following = struct.unpack_from("<HHIII", needs, entry)
                cursor = entry + aux
                for _ in range(count):
                    name, next_aux = struct.unpack_from("<II", needs, cursor + 8)
                    end = strings.index(b"\0", name)
                    names.append(strings[name:end].decode("ascii", "replace"))
                    cursor += next_aux
                entry += following
        return names


def glibc_needed(library: str | os.PathLike[str]) -> tuple[int, ...] | None:
    """The newest ``GLIBC_x.y`` version ``library`` references, as ``(x, y)``; None if none."""
    versions = [
        tuple(int(part) for part in name.removeprefix("GLIBC_").split("."))
        for name in _version_needs(library)
        if name.startswith("GLIBC_2")
    ]
    return max(versions, default=None)


def _recorded() -> dict[str, object]:
    try:
        with open(_RECORD, encoding="utf-8") as record:
            text = record.read()
    except OSError:
        return {}
    return _parsed(text)


def _parsed(text: str) -> dict[str, object]:
    """The record's JSON object; ``{}`` if it is not one.

    setup.py writes strings and lists of strings, unescaped: JSON that is a
    Python literal too, read here with :mod:`ast` (which attrs imports
    anyway) rather than by importing :mod:`json` for ``pmca info``'s header.
    Anything else (``null``, ``\\u`` escapes) is read by :mod:`json`.
    """
    loaded: object = None
    if "\\u" not in text:
        try:
            loaded = ast.literal_eval(text)
        except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError):
            loaded = None
    if not isinstance(loaded, dict):
        import json

        try:
            loaded = json.loads(text)
        except ValueError:
            return {}
    return loaded if isinstance(loaded, dict) else {}


def build_info() -> BuildInfo:
    """What the build recorded, and what the installed libraries need."""
    record = _recorded()
    libraries = _library_files()
    needed = [version for lib in libraries if (version := glibc_needed(lib)) is not None]
    newest = max(needed, default=None)
    compiler, glibc = record.get("compiler"), record.get("glibc")
    return BuildInfo(
        compiler=compiler if isinstance(compiler, str) else None,
        glibc=glibc if isinstance(glibc, str) else None,
        glibc_needed=".".join(map(str, newest)) if newest else None,
        libraries=tuple(os.path.relpath(lib, _PACKAGE) for lib in libraries),
    )
