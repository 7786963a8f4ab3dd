"""Build pmca's native libraries.

They are plain shared libraries loaded with ctypes, not CPython extensions:
an extension module can never be unloaded, and pmca's load modes need the
component libraries to be really ``dlclose``d while the hook backend itself
must stay resident (``-z nodelete``).
"""

from __future__ import annotations

import os
import sys

from setuptools import Extension, setup
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


CFLAGS = [
    "-O2",
    "-std=gnu11",
    "-fPIC",
    "-fvisibility=hidden",
    "-Wall",
    "-Wextra",
    "-fno-strict-aliasing",
    "-fno-omit-frame-pointer",
]


def libdl() -> list[str]:
    """dlopen/dladdr1 live in libc from glibc 2.34 on, in libdl before."""
    try:
        version = os.confstr("CS_GNU_LIBC_VERSION")
    except (AttributeError, ValueError, OSError):  # not glibc (musl), or no confstr
        return []
    if not version:
        return []
    major, minor = (int(part) for part in version.split()[1].split(".")[:2])
    return [] if (major, minor) >= (2, 34) else ["dl"]


def native_extensions() -> list[Extension]:
    if not sys.platform.startswith("linux"):
        return []
    return [
        Extension(
            "pmca.native.pmca_hooks",
            sources=[
                "src/pmca/native/hooks.c",
                "src/pmca/native/ring.c",
                "src/pmca/native/patch_x86_64.c",
                "src/pmca/native/x86_decode.c",
                "src/pmca/native/ucm.c",
            ],
            depends=["src/pmca/native/hooks.h", "src/pmca/native/x86_decode.h"],
            extra_compile_args=CFLAGS,
            extra_link_args=["-Wl,-z,nodelete", "-pthread"],
            libraries=libdl(),
        ),
        # Loaded (fresh copy) and dlclosed by pmca.native.coverage() only.
        Extension(
            "pmca.native.pmca_probe",
            sources=["src/pmca/native/probe.c"],
            extra_compile_args=CFLAGS,
            extra_link_args=["-pthread"],
        ),
        Extension(
            "pmca.patcher.overwrite.pmca_patcher_overwrite",
            sources=["src/pmca/patcher/overwrite/overwrite.c"],
            extra_compile_args=CFLAGS,
            extra_link_args=["-pthread"],
        ),
        Extension(
            "pmca.rcache.grdma.pmca_rcache_itree",
            sources=["src/pmca/rcache/grdma/itree.c", "src/pmca/rcache/grdma/itree_blocks.c"],
            extra_compile_args=CFLAGS,
            extra_link_args=["-pthread"],
        ),
        Extension(
            "pmca.rcache.iouring.pmca_uring",
            sources=["src/pmca/rcache/iouring/uring.c"],
            extra_compile_args=CFLAGS,
            extra_link_args=["-pthread"],
        ),
        Extension(
            "pmca.btl.sm.pmca_btl_sm",
            sources=[
                "src/pmca/btl/sm/segment.c",
                "src/pmca/btl/sm/queue.c",
                "src/pmca/btl/sm/cma.c",
                "src/pmca/btl/sm/lane.c",
            ],
            depends=["src/pmca/btl/sm/sm.h"],
            extra_compile_args=CFLAGS,
        ),
        # PMIx calls its handler on its own thread until PMIx_Finalize, maybe
        # later than any Python reference lives: never unloaded.
        Extension(
            "pmca.world.pmca_pmix_events",
            sources=["src/pmca/world/pmix_events.c"],
            extra_compile_args=CFLAGS,
            extra_link_args=["-Wl,-z,nodelete"],
        ),
    ]


setup(
    ext_modules=native_extensions(),
    cmdclass={"build_ext": build_plain_shared, "bdist_wheel": platform_wheel},
)
