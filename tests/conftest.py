"""Shared fixtures: real throwaway distributions on ``sys.path``."""

from __future__ import annotations

import importlib
import itertools
import sys
import textwrap
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path

import pytest

from pmca.runtime import RUNTIME
from pmca.testing import make_distribution

_counter = itertools.count()

InstallPlugin = Callable[..., Path]


@pytest.fixture(autouse=True)
def no_info_cache(monkeypatch: pytest.MonkeyPatch) -> None:
    """``pmca info`` run as a program computes its answer and writes no cache file."""
    monkeypatch.setenv("PMCA_INFO_CACHE", "none")


@pytest.fixture(scope="session")
def _entry_point_cache(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("entry-point-cache")


@pytest.fixture(autouse=True)
def entry_point_cache(monkeypatch: pytest.MonkeyPatch, _entry_point_cache: Path) -> None:
    """Entry points are kept between starts in the test run's own directory, not the user's."""
    monkeypatch.setenv("PMCA_ENTRY_POINT_CACHE", str(_entry_point_cache))


@pytest.fixture
def unique() -> Callable[[str], str]:
    """Unique lowercase names, so module caches never mix two tests."""
    run = next(_counter)
    return lambda stem: f"{stem}{run}x{next(_counter)}"


@pytest.fixture
def install_plugin(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, pmca_env: dict[str, str]
) -> Iterator[InstallPlugin]:
    """Install a distribution (entry points + modules) for the length of one test."""
    roots: list[Path] = []
    before = set(sys.modules)

    def install(
        name: str,
        *,
        entry_points: Mapping[str, Mapping[str, str]],
        modules: Mapping[str, str] | None = None,
        version: str = "0.1.0",
    ) -> Path:
        root = tmp_path / f"site-{name}"
        make_distribution(root, name, version=version, entry_points=entry_points, modules=modules)
        monkeypatch.syspath_prepend(str(root))
        importlib.invalidate_caches()
        roots.append(root)
        return root

    yield install
    assert RUNTIME.sessions == 0, "a test leaked a live pmca session"
    for module in set(sys.modules) - before:
        file = getattr(sys.modules.get(module), "__file__", None) or ""
        if any(file.startswith(str(root)) for root in roots):
            del sys.modules[module]


InstallFramework = Callable[..., str]


@pytest.fixture
def install_framework(install_plugin: InstallPlugin) -> InstallFramework:
    """Install framework ``fw`` (module ``<fw>_decl``) with components given as sources.

    Each component ``name`` lives in module ``<fw>_<name>`` and is found
    through its entry point ``pmca.<fw>:<name>``; returns the declaring
    module's name, whose ``EVENTS`` list the components may append to.
    """

    def install(
        fw: str,
        components: Mapping[str, str],
        *,
        policy: str = "single",
        declaration: str | None = None,
        version: str = "0.1.0",
    ) -> str:
        decl = f"{fw}_decl"
        modules = {decl: declaration or framework_source(fw, policy=policy)}
        points: dict[str, str] = {}
        for name, source in components.items():
            modules[f"{fw}_{name}"] = source
            points[name] = f"{fw}_{name}:TestComponent"
        install_plugin(
            f"dist-{fw}",
            entry_points={"pmca.frameworks": {fw: f"{decl}:FRAMEWORK"}, f"pmca.{fw}": points},
            modules=modules,
            version=version,
        )
        return decl

    return install


def framework_source(
    name: str, *, policy: str = "single", depends: tuple[str, ...] = (), extra: str = ""
) -> str:
    """Source of a module declaring framework ``name`` that records its events."""
    return textwrap.dedent(
        f"""
        import pmca

        EVENTS = []

        class Base(pmca.FrameworkBase):
            def opened(self):
                EVENTS.append(("opened", {name!r}))

            def closing(self):
                EVENTS.append(("closing", {name!r}))

        FRAMEWORK = pmca.Framework(
            name={name!r},
            description="test framework {name}",
            api_version="1.0.0",
            policy={policy!r},
            depends={depends!r},
            base=Base,
        )
        """
    ) + textwrap.dedent(extra)


def component_source(
    framework: str,
    name: str,
    *,
    priority: int = 10,
    api_version: str = "1.0.0",
    fail_in: str | None = None,
    available: bool = True,
    events_module: str | None = None,
) -> str:
    """Source of a module with one component, optionally failing in one hook."""
    record = f"import {events_module} as _events\n" if events_module else "_events = None\n"
    return record + textwrap.dedent(
        f"""
        import pmca

        STATE = {{"opens": 0}}

        class Module:
            name = {name!r}

        def _event(what):
            if _events is not None:
                _events.EVENTS.append((what, {framework!r} + "/" + {name!r}))

        def _maybe_fail(hook):
            if hook == {fail_in!r}:
                raise RuntimeError("boom in " + hook)

        class TestComponent(pmca.Component):
            framework = {framework!r}
            name = {name!r}
            version = "1.0.0"
            api_version = {api_version!r}

            @pmca.hookimpl
            def register(self, params):
                _maybe_fail("register")
                params.register("priority", type=int, default={priority}, help="priority")

            @pmca.hookimpl
            def open(self, ctx):
                _maybe_fail("open")
                STATE["opens"] += 1
                _event("open")
                return {available!r}

            @pmca.hookimpl
            def query(self, ctx):
                _maybe_fail("query")
                _event("query")
                return pmca.Query(priority=ctx.params["priority"], module=Module())

            @pmca.hookimpl
            def close(self, ctx):
                _event("close")
                _maybe_fail("close")
        """
    )
