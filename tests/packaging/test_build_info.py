"""What the installed pmca says about its build: recorded by setup.py, read from the libraries."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

import pmca
from pmca._build import build_info, glibc_needed, native_libraries

pytestmark = pytest.mark.skipif(
    not native_libraries(), reason="this pmca was installed without its native libraries"
)


def _this_glibc() -> tuple[int, ...]:
    return tuple(int(part) for part in os.confstr("CS_GNU_LIBC_VERSION").split()[1].split("."))


def test_build_records_the_compiler_and_glibc():
    info = build_info()
    assert info.compiler is not None and info.glibc is not None
    compiler = shutil.which("gcc") or shutil.which("cc")
    if compiler is not None:  # built here: the same compiler says the same first line
        first = subprocess.run([compiler, "--version"], capture_output=True, text=True).stdout
        assert info.compiler == first.splitlines()[0].strip()
    assert tuple(map(int, info.glibc.split("."))) <= _this_glibc()
    # The build recorded every library it put in the package.
    found = {str(lib) for lib in Path(pmca.__file__).parent.rglob("lib*.so")}
    assert {str(lib) for lib in native_libraries()} == found


def test_no_library_needs_a_glibc_newer_than_2_17():
    """The floor the manylinux tag promises: dlopen & co. bound to their pre-2.34 versions."""
    libraries = native_libraries()
    assert {lib.name for lib in libraries} >= {"libpmca_hooks.so", "libpmca_probe.so"}
    for library in libraries:
        needed = glibc_needed(library)
        assert needed is not None and needed[:2] <= (2, 17), (library.name, needed)
    assert build_info().glibc_needed is not None


def test_glibc_needed_reads_what_the_dynamic_linker_reads():
    """The reader agrees with objdump where binutils is installed, on libc's own users."""
    objdump = shutil.which("objdump")
    if objdump is None:
        pytest.skip("objdump is not installed")
    for library in native_libraries():
        dump = subprocess.run([objdump, "-p", str(library)], capture_output=True, text=True).stdout
        versions = [
            tuple(int(p) for p in word.removeprefix("GLIBC_").split("."))
            for word in dump.split()
            if word.startswith("GLIBC_2")
        ]
        assert glibc_needed(library) == max(versions), library.name


def test_info_names_the_build(capsys):
    from pmca.cli import main

    assert main(["info", "--parsable"]) == 0
    out = capsys.readouterr().out
    info = build_info()
    assert f"config:compiler:build:{info.compiler}" in out
    assert f"config:glibc:needed:{info.glibc_needed}" in out
    assert Path(pmca.__file__).parent.joinpath("_build_info.json").is_file()
