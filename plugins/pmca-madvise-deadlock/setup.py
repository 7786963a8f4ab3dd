"""Build the reproduction's native library: a plain shared library loaded with ctypes."""

from __future__ import annotations

import os

from setuptools import Extension, setup
from setuptools.command.build_ext import build_ext


class build_plain_shared(build_ext):
    """Link as ``lib<name>.so`` with no Python ABI suffix (it is not an extension module)."""

    def get_ext_filename(self, fullname: str) -> str:
        package, _, name = fullname.rpartition(".")
        return os.path.join(*package.split("."), f"lib{name}.so")

    def get_export_symbols(self, ext: Extension) -> list[str]:
        return []


setup(
    ext_modules=[
        Extension(
            "pmca_madvise_deadlock.pmca_madvise_deadlock",
            sources=[
                "src/pmca_madvise_deadlock/ompi_ofi.c",
                "src/pmca_madvise_deadlock/workload.c",
                "src/pmca_madvise_deadlock/pmca_monitor.c",
            ],
            extra_compile_args=["-O2", "-std=gnu11", "-fvisibility=hidden", "-Wall", "-Wextra"],
            extra_link_args=["-pthread"],
        )
    ],
    cmdclass={"build_ext": build_plain_shared},
)
