"""How this copy of pmca was built: compiler, C library, and what its native libraries need.

``setup.py`` records the compiler and the glibc it built against in
``_build_info.json`` beside this module. The glibc the libraries *need* is
read from the libraries themselves (the ELF version-needs section, the
GLIBC_x.y versions their symbol references carry), so it is true of the
files installed, whoever built them.
"""

from __future__ import annotations

import json
import struct
from pathlib import Path

from attrs import frozen

__all__ = ["BuildInfo", "build_info", "glibc_needed", "native_libraries"]

_PACKAGE = Path(__file__).resolve().parent
_RECORD = _PACKAGE / "_build_info.json"

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


def native_libraries(package: Path = _PACKAGE) -> list[Path]:
    """Every ``lib*.so`` under the package, sorted."""
    return sorted(package.rglob("lib*.so"))


def _version_needs(data: bytes) -> list[str]:
    """The version names (``GLIBC_2.17``...) an ELF64 little-endian file needs."""
    if data[:4] != b"\x7fELF" or data[4] != 2 or data[5] != 1:
        return []
    (shoff,) = struct.unpack_from("<Q", data, 0x28)
    shentsize, shnum = struct.unpack_from("<HH", data, 0x3A)
    sections = [
        struct.unpack_from("<IIQQQQIIQQ", data, shoff + index * shentsize) for index in range(shnum)
    ]
    names: list[str] = []
    for _name, kind, _flags, _addr, offset, _size, link, info, _align, _entsize in sections:
        if kind != _SHT_GNU_VERNEED:
            continue
        strings = sections[link][4]
        entry = offset
        for _ in range(info):
            _version, count, _file, aux, following = struct.unpack_from("<HHIII", data, entry)
            cursor = entry + aux
            for _ in range(count):
                _hash, _vflags, _other, name, next_aux = struct.unpack_from("<IHHII", data, cursor)
                end = data.index(b"\0", strings + name)
                names.append(data[strings + name : end].decode("ascii", "replace"))
                cursor += next_aux
            entry += following
    return names


def glibc_needed(library: Path) -> tuple[int, ...] | None:
    """The newest ``GLIBC_x.y`` version ``library`` references, as ``(x, y)``; None if none."""
    versions = [
        tuple(int(part) for part in name.removeprefix("GLIBC_").split("."))
        for name in _version_needs(library.read_bytes())
        if name.startswith("GLIBC_2")
    ]
    return max(versions, default=None)


def _recorded() -> dict[str, str | None]:
    try:
        loaded = json.loads(_RECORD.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return loaded if isinstance(loaded, dict) else {}


def build_info() -> BuildInfo:
    """What the build recorded, and what the installed libraries need."""
    record = _recorded()
    libraries = native_libraries()
    needed = [version for lib in libraries if (version := glibc_needed(lib)) is not None]
    newest = max(needed, default=None)
    return BuildInfo(
        compiler=record.get("compiler"),
        glibc=record.get("glibc"),
        glibc_needed=".".join(map(str, newest)) if newest else None,
        libraries=tuple(str(lib.relative_to(_PACKAGE)) for lib in libraries),
    )
