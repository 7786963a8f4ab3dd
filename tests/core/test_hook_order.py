"""A framework's hooks are called in selection order: highest priority first.

Two components of a ``multi`` framework, each from its own throwaway
distribution; their priorities are swapped through every parameter source.
pluggy alone calls the most recently registered plugin first, whatever the
priorities; pmca attaches the selected components so that the call order
is the selection order, in both load modes and in every session.
"""

from __future__ import annotations

import textwrap
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

import pmca

from ..conftest import InstallPlugin

FRAMEWORK = '''
import pmca

#: What the framework base saw when it called the hooks at ``opened``.
SEEN = []


class Spec:
    @pmca.hookspec
    def styles(self):
        """Every component's styles, best component first."""

    @pmca.hookspec(firstresult=True)
    def best(self):
        """The best component's answer."""


class Base(pmca.FrameworkBase):
    def opened(self):
        hook = self.framework.hook()
        SEEN.append((hook.styles(), hook.best()))


FRAMEWORK = pmca.Framework(
    name={fw!r},
    description="hook order",
    api_version="1.0.0",
    interface=Spec,
    policy="multi",
    base=Base,
)
'''

COMPONENT = """
import pmca

class TestComponent(pmca.Component):
    framework = {fw!r}
    name = {name!r}
    version = "1.0.0"
    api_version = "1.0.0"

    @pmca.hookimpl
    def register(self, params):
        params.register("priority", type=int, default={priority}, help="selection priority")

    @pmca.hookimpl
    def query(self, ctx):
        return pmca.Query(priority=ctx.params["priority"], module={name!r})

    @pmca.hookimpl
    def styles(self):
        return [{name!r}]

    @pmca.hookimpl
    def best(self):
        return {name!r}
"""


@pytest.fixture
def two_components(
    install_plugin: InstallPlugin, unique: Callable[[str], str]
) -> Iterator[tuple[str, str]]:
    """Framework ``fw`` from one distribution, components ``alpha`` and ``beta`` from two more.

    ``alpha`` defaults to priority 30, ``beta`` to 10. Yields the framework
    name and its declaring module.
    """
    fw = unique("order")
    decl = f"{fw}_decl"
    install_plugin(
        f"dist-{fw}",
        entry_points={"pmca.frameworks": {fw: f"{decl}:FRAMEWORK"}},
        modules={decl: FRAMEWORK.format(fw=fw)},
    )
    for name, priority in (("alpha", 30), ("beta", 10)):
        module = f"{fw}_{name}"
        install_plugin(
            f"dist-{fw}-{name}",
            entry_points={f"pmca.{fw}": {name: f"{module}:TestComponent"}},
            modules={module: COMPONENT.format(fw=fw, name=name, priority=priority)},
        )
    yield fw, decl


def _observed(fw: str, decl: str, **session: object) -> tuple[object, ...]:
    """Modules, hook results and firstresult answer of one session, and what the base saw."""
    import importlib

    with pmca.Session(frameworks=[fw], **session) as s:  # type: ignore[arg-type]
        handle = s.framework(fw)
        seen = importlib.import_module(decl).SEEN
        observed = (
            handle.modules(),
            handle.hook.styles(),
            handle.hook.best(),
            seen[-1],
        )
    return observed


ALPHA_FIRST = (["alpha", "beta"], [["alpha"], ["beta"]], "alpha", ([["alpha"], ["beta"]], "alpha"))
BETA_FIRST = (["beta", "alpha"], [["beta"], ["alpha"]], "beta", ([["beta"], ["alpha"]], "beta"))


def test_defaults_call_the_best_component_first(two_components) -> None:
    fw, decl = two_components
    assert _observed(fw, decl) == ALPHA_FIRST


def test_session_mca_swaps_the_order(two_components) -> None:
    fw, decl = two_components
    swapped = {f"{fw}_alpha_priority": "5", f"{fw}_beta_priority": "50"}
    assert _observed(fw, decl, mca=swapped) == BETA_FIRST


def test_environment_swaps_the_order(two_components, pmca_env) -> None:
    fw, decl = two_components
    pmca_env[f"PMCA_MCA_{fw}_alpha_priority"] = "5"
    pmca_env[f"PMCA_MCA_{fw}_beta_priority"] = "50"
    assert _observed(fw, decl) == BETA_FIRST


def test_parameter_file_swaps_the_order(two_components, pmca_env, tmp_path: Path) -> None:
    fw, decl = two_components
    conf = tmp_path / "order.conf"
    conf.write_text(
        textwrap.dedent(
            f"""\
            {fw}_alpha_priority = 5
            {fw}_beta_priority = 50
            """
        )
    )
    pmca_env["PMCA_MCA_mca_base_param_files"] = str(conf)
    assert _observed(fw, decl) == BETA_FIRST


def test_a_later_session_follows_its_own_selection(two_components) -> None:
    fw, decl = two_components
    swapped = {f"{fw}_alpha_priority": "5", f"{fw}_beta_priority": "50"}
    assert _observed(fw, decl) == ALPHA_FIRST
    assert _observed(fw, decl, mca=swapped) == BETA_FIRST
    assert _observed(fw, decl) == ALPHA_FIRST


def test_tryfirst_still_goes_first(install_framework, unique: Callable[[str], str]) -> None:
    """pluggy's ``tryfirst`` stays an author's explicit override of the priority order."""
    fw = unique("order")
    beta = COMPONENT.format(fw=fw, name="beta", priority=10).replace(
        "@pmca.hookimpl\n    def best", "@pmca.hookimpl(tryfirst=True)\n    def best"
    )
    install_framework(
        fw,
        {"alpha": COMPONENT.format(fw=fw, name="alpha", priority=30), "beta": beta},
        declaration=FRAMEWORK.format(fw=fw),
    )
    with pmca.Session(frameworks=[fw]) as s:
        assert s.framework(fw).hook.styles() == [["alpha"], ["beta"]]
        assert s.framework(fw).hook.best() == "beta"


MODULES_BASE = """
import warnings

import pmca

SEEN = {{}}


class Base(pmca.FrameworkBase):
    def opened(self):
        SEEN["call"] = self.framework.modules()
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            SEEN["legacy"] = list(self.framework.modules)
        SEEN["warnings"] = [(w.category, str(w.message)) for w in caught]


FRAMEWORK = pmca.Framework(
    name={fw!r}, description="modules", api_version="1.0.0", policy="multi", base=Base
)
"""


def test_a_base_and_a_handle_read_modules_with_one_call(
    install_framework, unique: Callable[[str], str]
) -> None:
    """``self.framework.modules()`` in a base is ``FrameworkHandle.modules()``; the old
    list attribute still reads the same modules, with a DeprecationWarning."""
    import importlib

    fw = unique("mods")
    decl = install_framework(
        fw,
        {
            n: COMPONENT.format(fw=fw, name=n, priority=p)
            .replace("@pmca.hookimpl\n    def styles", "def styles")
            .replace("@pmca.hookimpl\n    def best", "def best")
            for n, p in (("alpha", 10), ("beta", 20))
        },
        declaration=MODULES_BASE.format(fw=fw),
    )
    with pmca.Session(frameworks=[fw]) as s:
        handle_modules = s.framework(fw).modules()
    seen = importlib.import_module(decl).SEEN
    assert handle_modules == seen["call"] == ["beta", "alpha"]
    assert type(seen["call"]) is list
    assert seen["legacy"] == ["beta", "alpha"]
    assert seen["warnings"]
    assert {category for category, _ in seen["warnings"]} == {DeprecationWarning}
    assert "call framework.modules()" in seen["warnings"][0][1]


def test_plugins_registered_attached_are_ordered_too() -> None:
    """A plugin whose hooks pmca cannot read from its class (here: an instance with a
    method of its own) is registered attached at once; attaching in order moves it."""
    from pmca.mca._plugins import ComponentManager

    class Spec:
        @pmca.hookspec
        def styles(self):  # type: ignore[no-untyped-def]
            """Each plugin's styles."""

    class FromClass:
        def __init__(self, name: str) -> None:
            self.name = name

        @pmca.hookimpl
        def styles(self) -> list[str]:
            return [self.name]

    def own(name: str) -> object:
        plugin = FromClass(name)

        @pmca.hookimpl
        def styles() -> list[str]:
            return [name]

        plugin.styles = styles  # type: ignore[method-assign]
        return plugin

    pm = ComponentManager("pmca")
    pm.add_hookspecs(Spec)
    plugins = [FromClass("a"), own("b"), FromClass("c"), own("d")]
    for plugin in plugins:
        pm.register_detached(plugin, name=plugin.name)  # type: ignore[attr-defined]
    assert pm.hook.styles() == [["d"], ["b"]]  # pluggy's order: registered last first
    best_first = [plugins[2], plugins[1], plugins[3], plugins[0]]
    pm.attach_in_order(best_first)
    assert pm.hook.styles() == [["c"], ["b"], ["d"], ["a"]]
    for plugin in (plugins[1], plugins[2]):
        pm.unregister(plugin)  # and they leave the callers again
    assert pm.hook.styles() == [["d"], ["a"]]
