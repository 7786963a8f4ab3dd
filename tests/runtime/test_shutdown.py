"""Ordered shutdown: dependencies, nested opens, stale references, leaks."""

from __future__ import annotations

import gc
import os
import sys
import threading

import pytest

import pmca
from pmca.runtime import RUNTIME
from tests.conftest import component_source, framework_source

NESTING_COMPONENT = """
import pmca

class TestComponent(pmca.Component):
    framework = "{outer}"
    name = "nest"
    version = "1.0.0"
    api_version = "1.0.0"

    @pmca.hookimpl
    def query(self, ctx):
        inner = ctx.open_framework("{inner}")
        return pmca.Query(priority=1, module=inner.module())

    @pmca.hookimpl
    def close(self, ctx):
        ctx.close_framework("{inner}")
"""


@pytest.fixture
def stack(install_plugin, unique) -> tuple[str, str, str, str]:
    """bottom <- middle (depends) ; top's component opens leaf (nested)."""
    bottom, middle, top, leaf = (unique(n) for n in ("bottom", "middle", "top", "leaf"))
    modules = {
        f"{bottom}_decl": framework_source(bottom),
        f"{middle}_decl": framework_source(middle, depends=(bottom,)),
        f"{top}_decl": framework_source(top, depends=(middle,)),
        f"{leaf}_decl": framework_source(leaf),
        f"{bottom}_c": component_source(bottom, "c"),
        f"{middle}_c": component_source(middle, "c"),
        f"{leaf}_c": component_source(leaf, "c"),
        f"{top}_nest": NESTING_COMPONENT.replace("{outer}", top).replace("{inner}", leaf),
    }
    install_plugin(
        f"dist-{top}",
        entry_points={
            "pmca.frameworks": {n: f"{n}_decl:FRAMEWORK" for n in (bottom, middle, top, leaf)},
            f"pmca.{bottom}": {"c": f"{bottom}_c:TestComponent"},
            f"pmca.{middle}": {"c": f"{middle}_c:TestComponent"},
            f"pmca.{leaf}": {"c": f"{leaf}_c:TestComponent"},
            f"pmca.{top}": {"nest": f"{top}_nest:TestComponent"},
        },
        modules=modules,
    )
    return bottom, middle, top, leaf


def test_close_order_is_the_reverse_of_open_order(stack) -> None:
    bottom, middle, top, leaf = stack
    with pmca.Session(frameworks=[top]) as session:
        assert type(session.module(top)).name == "c"  # type: ignore[attr-defined]
        history = list(RUNTIME.history)
    opened = [name for kind, name in history if kind == "open"]
    assert opened == [bottom, middle, leaf, top]
    closed = [name for kind, name in RUNTIME.history if kind == "close"]
    assert closed == list(reversed(opened))


def test_nested_opens_are_refcounted(stack) -> None:
    _bottom, _middle, top, leaf = stack
    with pmca.Session(frameworks=[leaf]):
        with pmca.Session(frameworks=[top]):
            assert RUNTIME.frameworks[leaf].refcount == 2
        assert RUNTIME.frameworks[leaf].refcount == 1
        assert top not in RUNTIME.frameworks
    assert not RUNTIME.frameworks


def test_dependency_cycles_are_reported(install_plugin, unique) -> None:
    a, b = unique("cyca"), unique("cycb")
    install_plugin(
        f"dist-{a}",
        entry_points={"pmca.frameworks": {a: f"{a}_d:FRAMEWORK", b: f"{b}_d:FRAMEWORK"}},
        modules={
            f"{a}_d": framework_source(a, depends=(b,)),
            f"{b}_d": framework_source(b, depends=(a,)),
        },
    )
    with pytest.raises(pmca.FrameworkError, match=f"cycle: {a} -> {b} -> {a}"):
        pmca.Session(frameworks=[a]).init()
    assert RUNTIME.sessions == 0


def test_a_global_pointing_at_a_closed_component_fails_loudly(install_framework, unique) -> None:
    fw = unique("stale")
    leaky = component_source(fw, "leaky").replace(
        "return pmca.Query(",
        "import pmca.patcher as _p; _p.LEAKED = self\n        return pmca.Query(",
    )
    install_framework(fw, {"leaky": leaky})
    import pmca.patcher

    session = pmca.Session(frameworks=[fw]).init()
    try:
        with pytest.raises(
            pmca.StaleReferenceError, match=r"pmca\.patcher\.LEAKED still refers to component"
        ):
            session.finalize()
    finally:
        del pmca.patcher.LEAKED  # type: ignore[attr-defined]
    assert RUNTIME.sessions == 0


def _resources() -> tuple[int, int, int, int]:
    gc.collect()
    return (
        len(os.listdir("/proc/self/fd")),
        threading.active_count(),
        len(sys.modules),
        0,
    )


@pytest.mark.parametrize("mode", ["static", "dso"])
def test_no_growth_over_200_cycles(stack, mode: str) -> None:
    _bottom, _middle, top, _leaf = stack
    mca = {"mca_base_component_dso": "all" if mode == "dso" else "none"}
    for _ in range(5):  # warm up caches and resident modules
        with pmca.Session(mca=mca, frameworks=[top]):
            pass
    params_inside = None
    before = _resources()
    for _ in range(200):
        with pmca.Session(mca=mca, frameworks=[top]):
            count = len(RUNTIME.params.params())
            params_inside = count if params_inside is None else params_inside
            assert count == params_inside, "registered parameters grew between cycles"
    after = _resources()
    assert after == before, f"fds, threads, sys.modules: {before} -> {after}"


def test_selected_patcher_module_is_reset_to_the_empty_module(pmca_env) -> None:
    import pmca.patcher

    assert pmca.patcher.current() is pmca.patcher.EMPTY_PATCHER
    with pmca.Session(frameworks=["patcher"]) as session:
        if not session.modules("patcher"):
            pytest.skip("no patcher component is available here")
        live = pmca.patcher.current()
        assert live is session.module("patcher")
    assert pmca.patcher.current() is pmca.patcher.EMPTY_PATCHER
    assert pmca.patcher.restore_all() == []
    with pytest.raises(pmca.FrameworkError, match="no patcher module is selected"):
        pmca.patcher.current().patch_symbol("munmap", owner="test")
