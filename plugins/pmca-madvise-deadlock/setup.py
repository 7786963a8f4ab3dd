"""Build the reproduction's native library: a plain shared library loaded with ctypes.

The build is pmca's own (``native_build.py`` and ``glibc_floor.h`` are links
to pmca's files), so the library loads on the same glibc range as pmca's.
"""

from __future__ import annotations

import os
import sys

from setuptools import Extension, setup

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)  # setuptools.build_meta does not put it there

from native_build import (  # noqa: E402
    build_plain_shared,
    glibc_floor,
    old_glibc_homes,
    platform_wheel,
    with_headers,
)

FLOOR = os.path.join("src", "pmca_madvise_deadlock", "glibc_floor.h")

setup(
    ext_modules=with_headers(
        [
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
                    *glibc_floor(os.path.join(HERE, FLOOR)),
                ],
                extra_link_args=["-pthread", *old_glibc_homes()],
            )
        ],
        FLOOR,
    ),
    cmdclass={"build_ext": build_plain_shared, "bdist_wheel": platform_wheel},
)
