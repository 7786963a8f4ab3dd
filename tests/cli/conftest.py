"""A throwaway framework with components for ``pmca info``, and ways to run the CLI."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from collections.abc import Callable
from pathlib import Path

import attrs
import pytest

from pmca.cli import main
from tests.conftest import InstallPlugin, framework_source


def component_source(framework: str, name: str, *, version: str = "2.3.4") -> str:
    """A component with parameters at level 1 and 9, a bool and a value with a colon."""
    return textwrap.dedent(
        f"""
        import pmca

        class TestComponent(pmca.Component):
            framework = {framework!r}
            name = {name!r}
            version = {version!r}
            api_version = "1.0.0"

            @pmca.hookimpl
            def register(self, params):
                params.register("priority", type=int, default=10, level=1,
                                help="Priority of the {name} component")
                params.register("secret_knob", type=int, default=7, level=9,
                                help="A knob for developers only")
                params.register("enable", type=bool, default=True, level=3,
                                help="Whether {name} may be used")
                params.register("search_path", type=str, default="/a:/b", level=4,
                                help="Where to look: a list of directories")

            @pmca.hookimpl
            def query(self, ctx):
                return pmca.Query(priority=ctx.params["priority"], module=object())
        """
    )


BROKEN = "raise ImportError('libfoo.so.3: cannot open shared object file')\n"


@attrs.frozen
class PluginFramework:
    """What :func:`plugin_fw` installed."""

    name: str
    root: Path
    distribution: str


@pytest.fixture
def plugin_fw(install_plugin: InstallPlugin, unique: Callable[[str], str]) -> PluginFramework:
    """Framework ``<fw>`` (entry point) with components alpha, beta and broken."""
    fw = unique("infofw")
    dist = f"dist-{fw}"
    modules = {f"{fw}_decl": framework_source(fw, policy="multi")}
    points: dict[str, str] = {}
    for component in ("alpha", "beta"):
        modules[f"{fw}_{component}"] = component_source(fw, component)
        points[component] = f"{fw}_{component}:TestComponent"
    modules[f"{fw}_broken"] = BROKEN
    points["broken"] = f"{fw}_broken:TestComponent"
    root = install_plugin(
        dist,
        entry_points={"pmca.frameworks": {fw: f"{fw}_decl:FRAMEWORK"}, f"pmca.{fw}": points},
        modules=modules,
        version="0.4.2",
    )
    return PluginFramework(fw, root, f"{dist} 0.4.2")


@attrs.frozen
class Result:
    code: int
    out: str
    err: str

    @property
    def lines(self) -> list[str]:
        return self.out.splitlines()


RunCli = Callable[..., Result]


@pytest.fixture
def cli(capsys: pytest.CaptureFixture[str], pmca_env: dict[str, str]) -> RunCli:
    """Run ``pmca`` in this process (fast); environment changes go through monkeypatch."""

    def run(*args: str) -> Result:
        capsys.readouterr()
        code = main(list(args))
        captured = capsys.readouterr()
        return Result(code, captured.out, captured.err)

    return run


@pytest.fixture
def run_pmca(pmca_env: dict[str, str]) -> Callable[..., Result]:
    """Run ``python -m pmca.cli`` in a child process, as the console script runs."""
    import pmca

    source = str(Path(pmca.__file__).resolve().parent.parent)

    def run(*args: str, env: dict[str, str] | None = None, path: tuple[Path, ...] = ()) -> Result:
        child = dict(os.environ)
        child.update(env or {})
        child["PYTHONPATH"] = os.pathsep.join(
            [*(str(p) for p in path), source, child.get("PYTHONPATH", "")]
        )
        done = subprocess.run(
            [sys.executable, "-m", "pmca.cli", *args],
            capture_output=True,
            text=True,
            env=child,
            timeout=120,
            check=False,
        )
        return Result(done.returncode, done.stdout, done.stderr)

    return run


@pytest.fixture(autouse=True)
def hermetic(monkeypatch: pytest.MonkeyPatch, pmca_env: dict[str, str]) -> None:
    """No user or system parameter file may change what the tests see."""
    monkeypatch.setenv("PMCA_MCA_mca_base_param_files", "none")
    monkeypatch.setenv("PMCA_MCA_mca_base_override_param_file", "none")
