"""pmca's binary wheels install and work where no C compiler can be reached.

The wheels are the ones ``make wheel`` put in ``dist/`` (``make test`` builds
them first and names the directory in ``PMCA_WHEEL_DIR``; there, missing
wheels fail the test instead of skipping it). Each test installs them into a
fresh virtual environment whose ``PATH`` holds nothing but that environment
and whose ``CC`` names no program, then runs pmca from it.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from pmca._build import glibc_needed

ROOT = Path(__file__).resolve().parents[2]
WHEEL_DIR_VARIABLE = "PMCA_WHEEL_DIR"
#: ``manylinux_2_17_x86_64``: glibc 2.17 on x86_64.
MANYLINUX = re.compile(r"manylinux_(\d+)_(\d+)_(\w+?)(?:\.|$)")
#: Distributions of this repository that ship native libraries.
NATIVE_DISTRIBUTIONS = ("pmca", "pmca_madvise_deadlock")
BUNDLED = ("pmca_hello", "pmca_ompi_13021")
TIMEOUT = 600


def _wheel_dir() -> Path:
    return Path(os.environ.get(WHEEL_DIR_VARIABLE) or ROOT / "dist")


def _find(directory: Path, distribution: str) -> Path | None:
    found = sorted(directory.glob(f"{distribution}-*.whl"))
    return found[-1] if found else None


@pytest.fixture(scope="module")
def wheels() -> dict[str, Path]:
    directory = _wheel_dir()
    found = {name: _find(directory, name) for name in (*NATIVE_DISTRIBUTIONS, *BUNDLED)}
    missing = sorted(name for name, path in found.items() if path is None)
    if missing:
        message = f"no wheel of {', '.join(missing)} in {directory}: run `make wheel` first"
        if os.environ.get(WHEEL_DIR_VARIABLE):
            pytest.fail(message)
        pytest.skip(message)
    return {name: path for name, path in found.items() if path is not None}


def _no_compiler_env(venv: Path) -> dict[str, str]:
    """The environment of every command here: the venv's bin on PATH, and nothing else."""
    path = str(venv / "bin")
    for compiler in ("gcc", "cc", "clang", "x86_64-linux-gnu-gcc"):
        assert shutil.which(compiler, path=path) is None, f"{compiler} reachable on {path}"
    env = {"PATH": path, "HOME": os.environ.get("HOME", "/root"), "CC": "/nonexistent/cc"}
    env.update({key: value for key, value in os.environ.items() if key.startswith("PIP_")})
    return env


@pytest.fixture(scope="module")
def bare_venv(tmp_path_factory: pytest.TempPathFactory, wheels: dict[str, Path]) -> Path:
    """A fresh venv with the wheels (and their dependencies, binary only) installed."""
    venv = tmp_path_factory.mktemp("no-compiler") / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True, timeout=TIMEOUT)
    installed = subprocess.run(
        [str(venv / "bin" / "python"), "-m", "pip", "install", "--quiet", "--only-binary", ":all:"]
        + [str(path) for path in wheels.values()],
        env=_no_compiler_env(venv),
        capture_output=True,
        text=True,
        timeout=TIMEOUT,
        check=False,
    )
    assert installed.returncode == 0, installed.stdout + installed.stderr
    return venv


def _run(venv: Path, *command: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(venv / "bin" / command[0]), *command[1:]],
        env=_no_compiler_env(venv),
        capture_output=True,
        text=True,
        timeout=TIMEOUT,
        check=False,
    )


def test_native_wheels_are_manylinux_and_need_no_newer_glibc(wheels, tmp_path):
    """The tag promises a glibc; no library in the wheel references a newer symbol version."""
    for name in NATIVE_DISTRIBUTIONS:
        wheel = wheels[name]
        tag = MANYLINUX.search(wheel.name)
        assert tag is not None, f"{wheel.name} is not manylinux-tagged"
        assert wheel.name.split("-")[2:4] == ["py3", "none"], wheel.name
        promised = (int(tag[1]), int(tag[2]))
        with zipfile.ZipFile(wheel) as archive:
            libraries = [n for n in archive.namelist() if n.endswith(".so")]
            assert libraries, f"{wheel.name} carries no native library"
            archive.extractall(tmp_path / name, members=libraries)
        for library in libraries:
            needed = glibc_needed(tmp_path / name / library)
            assert needed is not None and needed[:2] <= promised, (wheel.name, library, needed)


def test_pmca_wheel_carries_every_native_library(wheels):
    """The same libraries as the pmca these tests run against, built by the same setup.py."""
    import pmca

    here = Path(pmca.__file__).parent
    expected = {f"pmca/{lib.relative_to(here)}" for lib in here.rglob("lib*.so")}
    assert expected, "the pmca under test has no native library"
    with zipfile.ZipFile(wheels["pmca"]) as archive:
        carried = {n for n in archive.namelist() if n.endswith(".so")}
        record = json.loads(archive.read("pmca/_build_info.json"))
    assert carried == expected
    assert record["compiler"] and record["glibc"]
    assert {f"pmca/{name}" for name in record["libraries"]} == carried


def test_doctor_quick_is_ok_without_a_compiler(bare_venv):
    doctor = _run(bare_venv, "pmca", "doctor", "--quick")
    assert doctor.returncode == 0, doctor.stdout + doctor.stderr
    assert "verdict: OK" in doctor.stdout, doctor.stdout
    assert re.search(r"ok\s+native backend\s+loaded", doctor.stdout), doctor.stdout


def test_every_native_library_loads_without_a_compiler(bare_venv, wheels):
    probe = """
import ctypes, json, pathlib
import pmca, pmca_madvise_deadlock
loaded = []
for package in (pmca, pmca_madvise_deadlock):
    root = pathlib.Path(package.__file__).parent
    for library in sorted(root.rglob("lib*.so")):
        ctypes.CDLL(str(library))
        loaded.append(f"{root.name}/{library.relative_to(root)}")
print(json.dumps(loaded))
"""
    result = _run(bare_venv, "python", "-c", probe)
    assert result.returncode == 0, result.stdout + result.stderr
    loaded = set(json.loads(result.stdout.splitlines()[-1]))
    shipped: set[str] = set()
    for name in NATIVE_DISTRIBUTIONS:
        with zipfile.ZipFile(wheels[name]) as archive:
            shipped |= {n for n in archive.namelist() if n.endswith(".so")}
    assert loaded == shipped


def test_version_names_the_build(bare_venv):
    version = _run(bare_venv, "pmca", "--version")
    assert version.returncode == 0, version.stderr
    line = version.stdout.strip()
    assert re.search(r"built with \S+.* against glibc \d+\.\d+; needs glibc >= 2\.\d+", line), line


def test_sdist_without_a_compiler_says_so(bare_venv):
    sdists = sorted(_wheel_dir().glob("pmca-*.tar.gz"))
    if not sdists:
        pytest.skip("no sdist in dist/: run `make wheel` first")
    pip = ("python", "-m", "pip", "install", "--no-deps", "--force-reinstall")
    built = _run(bare_venv, *pip, str(sdists[-1]))
    assert built.returncode != 0
    output = built.stdout + built.stderr
    assert "C compiler '/nonexistent/cc' was not found" in output, output[-3000:]
    assert "binary wheel" in output
