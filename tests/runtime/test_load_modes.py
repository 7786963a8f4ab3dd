"""static vs dso: module state, sys.modules, parameters and native libraries."""

from __future__ import annotations

import ctypes
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

import pmca
from tests.conftest import framework_source

COUNTER_COMPONENT = """
import pmca

OPENS = []          # module-level state: survives only if the module stays resident


class Module:
    def __init__(self, library):
        self.library = library


class TestComponent(pmca.Component):
    framework = "{fw}"
    name = "counter"
    version = "1.0.0"
    api_version = "1.0.0"

    @pmca.hookimpl
    def register(self, params):
        params.register("flavour", type=str, default="plain", help="anything")
        params.register("library", type=str, default="", help="a native library to load")

    @pmca.hookimpl
    def open(self, ctx):
        OPENS.append(ctx.load_mode)

    @pmca.hookimpl
    def query(self, ctx):
        library = None
        if ctx.params["library"]:
            library = ctx.load_library(ctx.params["library"])
        return pmca.Query(priority=1, module=Module(library))
"""


@pytest.fixture
def fw(install_plugin, unique) -> str:
    name = unique("mode")
    install_plugin(
        f"dist-{name}",
        entry_points={
            "pmca.frameworks": {name: f"{name}_decl:FRAMEWORK"},
            f"pmca.{name}": {"counter": f"{name}_pkg.counter:TestComponent"},
        },
        modules={
            f"{name}_decl": framework_source(name),
            f"{name}_pkg.counter": COUNTER_COMPONENT.replace("{fw}", name),
            f"{name}_pkg.helper": "VALUE = 1\n",
        },
    )
    return name


@pytest.fixture(scope="module")
def tiny_library(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A real shared library, built with gcc, to watch in /proc/self/maps."""
    gcc = shutil.which("gcc")
    if gcc is None:
        pytest.skip("gcc is needed to build a test library")
    directory = tmp_path_factory.mktemp("lib")
    source = directory / "tiny.c"
    source.write_text("int pmca_tiny_answer(void) { return 42; }\n")
    library = directory / "libpmca_tiny_test.so"
    subprocess.run([gcc, "-shared", "-fPIC", "-o", str(library), str(source)], check=True)
    return library


def mapped(path: Path) -> bool:
    return str(path) in Path("/proc/self/maps").read_text()


def component_module(fw: str):  # type: ignore[no-untyped-def]
    return sys.modules[f"{fw}_pkg.counter"]


def test_dso_state_resets_between_sessions(fw: str) -> None:
    mca = {"mca_base_component_dso": "all"}
    for expected in (["dso"], ["dso"], ["dso"]):
        with pmca.Session(mca=mca, frameworks=[fw]) as session:
            assert session.components(fw)[0].load_mode == "dso"
            assert expected == component_module(fw).OPENS
        assert f"{fw}_pkg.counter" not in sys.modules
        assert f"{fw}_pkg" not in sys.modules  # the whole package was the component's


def test_static_state_persists_between_sessions(fw: str) -> None:
    mca = {"mca_base_component_dso": "none"}
    for count in (1, 2, 3):
        with pmca.Session(mca=mca, frameworks=[fw]) as session:
            assert session.components(fw)[0].load_mode == "static"
            assert ["static"] * count == component_module(fw).OPENS
        assert f"{fw}_pkg.counter" in sys.modules


def test_dso_parameters_are_deregistered_at_close(fw: str) -> None:
    with pmca.Session(mca={"mca_base_component_dso": "all"}, frameworks=[fw]) as session:
        assert session.param(f"{fw}_counter_flavour").value == "plain"
        with pmca.Session(frameworks=[]) as other:
            assert other.param(f"{fw}_counter_flavour").value == "plain"
    with pmca.Session(frameworks=[]) as session, pytest.raises(pmca.ParamError):
        session.param(f"{fw}_counter_flavour")


@pytest.mark.parametrize("mode", ["dso", "static"])
def test_native_library_is_dlclosed_only_in_dso_mode(
    fw: str, tiny_library: Path, tmp_path: Path, mode: str
) -> None:
    # A private copy per test, so a resident (static) copy elsewhere cannot
    # hide an unload.
    library = tmp_path / f"libpmca_tiny_{mode}.so"
    shutil.copy(tiny_library, library)
    mca = {
        "mca_base_component_dso": "all" if mode == "dso" else "none",
        f"{fw}_counter_library": str(library),
    }
    for _ in range(2):
        with pmca.Session(mca=mca, frameworks=[fw]) as session:
            module = session.module(fw)
            assert module.library.cdll.pmca_tiny_answer() == 42  # type: ignore[attr-defined]
            assert mapped(library)
        del module
        assert mapped(library) is (mode == "static")


def test_unloaded_library_addresses_are_quarantined(
    fw: str, tiny_library: Path, tmp_path: Path
) -> None:
    """A stale pointer into a dlclosed component library faults at once."""
    from pmca.mca._loader import quarantined
    from pmca.testing import run_python

    library = tmp_path / "libpmca_tiny_quarantine.so"
    shutil.copy(tiny_library, library)
    mca = {"mca_base_component_dso": "all", f"{fw}_counter_library": str(library)}
    with pmca.Session(mca=mca, frameworks=[fw]) as session:
        function = session.module(fw).library.cdll.pmca_tiny_answer  # type: ignore[attr-defined]
        address = ctypes.cast(function, ctypes.c_void_p).value
        assert function() == 42
    assert address is not None and quarantined(address) == library.resolve()
    # Reloading maps the library somewhere else; the old range stays reserved.
    with pmca.Session(mca=mca, frameworks=[fw]) as session:
        again = session.module(fw).library.cdll.pmca_tiny_answer  # type: ignore[attr-defined]
        assert ctypes.cast(again, ctypes.c_void_p).value != address
        assert again() == 42
    del function, again

    # Calling the stale pointer: a child process dies of SIGSEGV, not of luck.
    child = run_python(
        f"""
        import ctypes, sys
        sys.path[:0] = {sys.path!r}
        import pmca
        mca = {mca!r}
        with pmca.Session(mca=mca, frameworks=[{fw!r}]) as s:
            stale = s.module({fw!r}).library.cdll.pmca_tiny_answer
        with pmca.Session(mca=mca, frameworks=[{fw!r}]):
            stale()
        print("survived")
        """,
        timeout=60,
    )
    assert child.returncode == -11, child.stderr
    assert "survived" not in child.stdout


def test_forced_static_builtin_is_never_reimported(pmca_env) -> None:
    """A forced-static built-in keeps the classes users imported, even in dso mode."""
    from pmca.memory.patcher import PatcherMemoryComponent

    module = sys.modules["pmca.memory.patcher"]
    for _ in range(2):
        with pmca.Session(mca={"mca_base_component_dso": "all"}, frameworks=["memory"]) as s:
            assert s.components("memory")[0].load_mode == "static"
            assert sys.modules["pmca.memory.patcher"] is module
            assert module.PatcherMemoryComponent is PatcherMemoryComponent
