"""Build pmca's native libraries.

They are plain shared libraries loaded with ctypes, not CPython extensions:
an extension module can never be unloaded, and pmca's load modes need the
component libraries to be really ``dlclose``d while the hook backend itself
must stay resident (``-z nodelete``).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys

from setuptools import Extension, setup
from setuptools.errors import PlatformError

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)  # setuptools.build_meta does not put it there

from native_build import (  # noqa: E402
    build_plain_shared,
    glibc,
    glibc_floor,
    old_glibc_homes,
    platform_wheel,
    with_headers,
)

#: What the build records about itself, read by ``pmca --version`` and ``pmca info``.
BUILD_INFO = os.path.join("pmca", "_build_info.json")


class build_checked(build_plain_shared):
    """Say clearly when no C compiler is found; record what built the libraries."""

    def build_extensions(self) -> None:
        command = self.compiler.compiler_so[0] if self.extensions else None
        if command is not None and shutil.which(command) is None:
            raise PlatformError(
                f"pmca compiles its native libraries (memory hooks, btl/sm, rcache) from C "
                f"when installed from source, and the C compiler {command!r} was not found "
                f"(CC={os.environ.get('CC', '(unset)')!r}, PATH={os.environ.get('PATH', '')!r}). "
                "Install gcc, point CC at a C compiler, or install pmca's binary wheel "
                "(pip install --only-binary pmca pmca), which needs no compiler."
            )
        super().build_extensions()
        if command is not None:
            self._record_build(command)

    def _record_build(self, command: str) -> None:
        """Write which compiler and C library built the native libraries into the package."""
        try:
            version = subprocess.run(
                [command, "--version"], capture_output=True, text=True, check=False
            ).stdout.splitlines()[0]
        except (OSError, IndexError):
            version = command
        root = os.path.join(HERE, "src") if self.inplace else self.build_lib
        package = os.path.join(root, "pmca")
        info = {
            "compiler": version.strip(),
            "glibc": ".".join(map(str, glibc() or ())) or None,
            "libraries": sorted(os.path.relpath(path, package) for path in self.get_outputs()),
        }
        with open(os.path.join(root, BUILD_INFO), "w", encoding="utf-8") as stream:
            # Unescaped (a Python literal too: pmca._build reads it without json).
            json.dump(info, stream, indent=1, ensure_ascii=False)
            stream.write("\n")


def libdl() -> list[str]:
    """dlopen/dladdr1 live in libc from glibc 2.34 on, in libdl before."""
    version = glibc()
    return [] if version is None or version >= (2, 34) else ["dl"]


#: Binds the libc functions that moved to GLIBC_2.34 to their original
#: versions, so libraries built on a new glibc load on older ones too.
FLOOR = os.path.join("src", "pmca", "native", "glibc_floor.h")


CFLAGS = [
    "-O2",
    "-std=gnu11",
    "-fPIC",
    "-fvisibility=hidden",
    "-Wall",
    "-Wextra",
    "-fno-strict-aliasing",
    "-fno-omit-frame-pointer",
    *glibc_floor(os.path.join(HERE, FLOOR)),
]


def native_extensions() -> list[Extension]:
    if not sys.platform.startswith("linux"):
        return []
    return with_headers(
        [
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
                extra_link_args=["-Wl,-z,nodelete", "-pthread", *old_glibc_homes()],
                libraries=libdl(),
            ),
            # Loaded (fresh copy) and dlclosed by pmca.native.coverage() only.
            Extension(
                "pmca.native.pmca_probe",
                sources=["src/pmca/native/probe.c"],
                extra_compile_args=CFLAGS,
                extra_link_args=["-pthread", *old_glibc_homes()],
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
                    "src/pmca/btl/sm/lane_buffers.c",
                ],
                depends=["src/pmca/btl/sm/sm.h"],
                extra_compile_args=CFLAGS,
            ),
            Extension(
                "pmca.btl.bml.pmca_bml_spin",
                sources=["src/pmca/btl/bml/spin.c"],
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
        ],
        FLOOR,
    )


setup(
    ext_modules=native_extensions(),
    cmdclass={"build_ext": build_checked, "bdist_wheel": platform_wheel},
)
