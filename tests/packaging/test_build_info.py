"""What the installed pmca says about its build: recorded by setup.py, read from the libraries."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

import pmca
from pmca._build import _parsed, build_info, glibc_needed, native_libraries

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


_TEXT = st.text(st.characters(codec="utf-8"), max_size=12)
_RECORDS = st.dictionaries(
    _TEXT, st.one_of(st.none(), _TEXT, st.lists(_TEXT, max_size=4)), max_size=4
)


@given(record=_RECORDS, ascii_only=st.booleans())
def test_the_build_record_reads_as_json_reads_it(
    record: dict[str, object], ascii_only: bool
) -> None:
    """Read without importing json where the text is also a Python literal: the
    same object as ``json.loads``, whatever setup.py (this one or an older one,
    escaping non-ASCII) wrote."""
    text = json.dumps(record, indent=1, ensure_ascii=ascii_only)
    assert _parsed(text) == json.loads(text)


@pytest.mark.parametrize("text", ["", "[1, 2]", "{", "not json", '{"a": __import__("os")}'])
def test_a_build_record_that_is_no_json_object_reads_as_empty(text: str) -> None:
    assert _parsed(text) == {}
