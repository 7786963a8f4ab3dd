"""Build the reproduction's native library: a plain shared library loaded with ctypes."""

from __future__ import annotations

import os

from setuptools import Extension, setup
from setuptools.command.bdist_wheel import bdist_wheel
from setuptools.command.build_ext import build_ext

HERE = os.path.dirname(os.path.abspath(__file__))


class build_plain_shared(build_ext):
    """Link as ``lib<name>.so`` with no Python ABI suffix (it is not an extension module)."""

    def get_ext_filename(self, fullname: str) -> str:
        package, _, name = fullname.rpartition(".")
        return os.path.join(*package.split("."), f"lib{name}.so")

    def get_export_symbols(self, ext: Extension) -> list[str]:
        return []


class platform_wheel(bdist_wheel):
    """Tag the wheel ``py3-none-<platform>``: the library does not link against libpython."""

    def get_tag(self) -> tuple[str, str, str]:
        _python, _abi, platform = super().get_tag()
        return "py3", "none", platform


def on_glibc() -> bool:
    try:
        return bool(os.confstr("CS_GNU_LIBC_VERSION"))
    except (AttributeError, ValueError, OSError):
        return False


def glibc_floor() -> list[str]:
    """Bind the functions glibc 2.34 moved into libc to their older versions (glibc only)."""
    header = os.path.join(HERE, "src", "pmca_madvise_deadlock", "glibc_floor.h")
    return ["-include", header] if on_glibc() else []


def old_glibc_homes() -> list[str]:
    """libdl and libpthread, where those functions live on a glibc older than 2.34."""
    if not on_glibc():
        return []
    return [
        "-Wl,--push-state,--no-as-needed",
        "-l:libdl.so.2",
        "-l:libpthread.so.0",
        "-Wl,--pop-state",
    ]


setup(
    ext_modules=[
        Extension(
            "pmca_madvise_deadlock.pmca_madvise_deadlock",
            sources=[
                "src/pmca_madvise_deadlock/ompi_ofi.c",
                "src/pmca_madvise_deadlock/workload.c",
                "src/pmca_madvise_deadlock/pmca_monitor.c",
            ],
            extra_compile_args=[
                "-O2",
                "-std=gnu11",
                "-fvisibility=hidden",
                "-Wall",
                "-Wextra",
                *glibc_floor(),
            ],
            extra_link_args=["-pthread", *old_glibc_homes()],
        )
    ],
    cmdclass={"build_ext": build_plain_shared, "bdist_wheel": platform_wheel},
)
