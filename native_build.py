"""How this repository builds its native libraries, for each distribution's setup.py.

pmca and the bundled plugins that ship C build it the same way: plain shared
libraries loaded with ctypes (not CPython extensions: no Python ABI in their
names, no libpython, so one ``py3-none-<platform>`` wheel serves every
Python 3), compiled against glibc with ``glibc_floor.h`` forced in so that
a build on a new glibc still loads on an old one (see that header).

Each distribution builds on its own: pmca's setup.py imports this file from
beside it (its sdist includes it), a plugin's from a link beside its own
setup.py, and a plugin passes the floor header it ships (a link to pmca's)
to :func:`glibc_floor`.
"""

from __future__ import annotations

import glob
import os

from setuptools import Extension
from setuptools.command.bdist_wheel import bdist_wheel
from setuptools.command.build_ext import build_ext


class build_plain_shared(build_ext):
    """Link each extension as ``lib<name>.so`` with no Python ABI suffix."""

    def get_ext_filename(self, fullname: str) -> str:
        package, _, name = fullname.rpartition(".")
        return os.path.join(*package.split("."), f"lib{name}.so")

    def get_export_symbols(self, ext: Extension) -> list[str]:
        return []

    def get_libraries(self, ext: Extension) -> list[str]:
        return list(ext.libraries)


class platform_wheel(bdist_wheel):
    """Tag the wheel ``py3-none-<platform>``.

    The native libraries do not link against libpython, so one wheel serves
    every Python 3 on the platform (and tox can share one build across its
    interpreter matrix).
    """

    def get_tag(self) -> tuple[str, str, str]:
        _python, _abi, platform = super().get_tag()
        return "py3", "none", platform


def glibc() -> tuple[int, int] | None:
    """The version of the glibc being built against; None for another C library."""
    try:
        version = os.confstr("CS_GNU_LIBC_VERSION")
    except (AttributeError, ValueError, OSError):  # not glibc (musl), or no confstr
        return None
    if not version:
        return None
    major, minor = (int(part) for part in version.split()[1].split(".")[:2])
    return major, minor


def glibc_floor(header: str) -> list[str]:
    """The compiler flags forcing ``header`` (a ``glibc_floor.h``) into every source,
    against glibc only: it binds the functions glibc 2.34 moved into libc to their
    original symbol versions."""
    return ["-include", header] if glibc() is not None else []


def old_glibc_homes() -> list[str]:
    """Where those functions lived before glibc 2.34, as dependencies of the library.

    Every glibc has ``libdl.so.2`` and ``libpthread.so.0`` (empty since 2.34),
    so the library finds dlopen and pthread_create on an old glibc without
    relying on the process to have loaded them.
    """
    if glibc() is None:
        return []
    return [
        "-Wl,--push-state,--no-as-needed",
        "-l:libdl.so.2",
        "-l:libpthread.so.0",
        "-Wl,--pop-state",
    ]


def with_headers(extensions: list[Extension], floor: str) -> list[Extension]:
    """Each library also depends on the headers beside its sources and on ``floor``.

    setuptools rebuilds an object only when a source or a listed dependency is
    newer than it; a header left out of ``depends`` leaves a stale object in
    place (a library built before the floor header existed kept needing
    GLIBC_2.34 after every later build).
    """
    for extension in extensions:
        folders = sorted({os.path.dirname(source) for source in extension.sources})
        headers = [h for folder in folders for h in sorted(glob.glob(os.path.join(folder, "*.h")))]
        extension.depends = sorted({*extension.depends, *headers, floor})
    return extensions


__all__ = [
    "build_plain_shared",
    "glibc",
    "glibc_floor",
    "old_glibc_homes",
    "platform_wheel",
    "with_headers",
]
