"""What keeps costs linear: cached entry points, keyed plugin lookups, indexed parameters.

The behaviour each shortcut must keep is tested here; how fast they are is
for ``benchmarks/bench_scale.py`` and ``bench_startup.py``.
"""

from __future__ import annotations

import sys
import textwrap

import pluggy
import pytest

import pmca
from pmca.mca._discovery import EntryPointIndex
from pmca.mca._markers import PROJECT
from pmca.mca._plugins import ComponentManager
from pmca.mca.params import ParamSpace
from pmca.runtime import RUNTIME
from pmca.runtime._catalog import BUILTIN_FRAMEWORKS, Catalog, builtin_name, load_builtin
from pmca.testing import make_distribution, run_python
from tests.conftest import component_source


def test_entry_point_index_is_reused_until_sys_path_changes(tmp_path, monkeypatch) -> None:
    first = EntryPointIndex.scan()
    assert EntryPointIndex.scan() is first
    root = tmp_path / "site"
    make_distribution(root, "idx-dist", entry_points={"pmca.idxfw": {"one": "idx_one:C"}})
    monkeypatch.syspath_prepend(str(root))
    second = EntryPointIndex.scan()
    assert second is not first
    assert [ep.name for ep in second.group("pmca.idxfw")] == ["one"]


def test_entry_point_index_sees_a_distribution_added_to_a_directory_on_the_path(
    tmp_path, monkeypatch
) -> None:
    root = tmp_path / "site"
    root.mkdir()
    monkeypatch.syspath_prepend(str(root))
    assert EntryPointIndex.scan().group("pmca.latefw") == []
    make_distribution(root, "late-dist", entry_points={"pmca.latefw": {"two": "late_two:C"}})
    # The directory's modification time moved: the cached index is not used.
    assert [ep.name for ep in EntryPointIndex.scan().group("pmca.latefw")] == ["two"]


def test_a_session_finds_a_framework_installed_between_two_sessions(
    install_framework, unique
) -> None:
    with pmca.Session(frameworks=[]):
        pass
    fw = unique("late")
    install_framework(fw, {"solo": component_source(fw, "solo")})
    with pmca.Session(frameworks=[fw]) as session:
        assert [info.name for info in session.components(fw)] == ["solo"]


class _Plugin:
    def __init__(self, value: int) -> None:
        self.value = value

    @pmca.hookimpl
    def query(self, ctx: object) -> int:
        return self.value


class _Spec:
    @pmca.hookspec(firstresult=True)
    def query(self, ctx: object) -> int:  # type: ignore[empty-body]
        ...


def test_component_manager_keys_plugins_by_identity() -> None:
    manager = ComponentManager(PROJECT)
    manager.add_hookspecs(_Spec)
    plugins = [_Plugin(index) for index in range(5)]
    for index, plugin in enumerate(plugins):
        assert manager.register(plugin, name=f"p{index}") == f"p{index}"
    assert all(manager.is_registered(plugin) for plugin in plugins)
    assert not manager.is_registered(_Plugin(0))
    assert manager.get_name(plugins[3]) == "p3"
    with pytest.raises(ValueError, match="already registered"):
        manager.register(plugins[3], name="again")
    impl = manager.implementation(plugins[2], "query")
    assert impl is not None and impl.function(None) == 2
    assert manager.implementation(plugins[2], "open") is None
    manager.unregister(plugins[2])
    assert not manager.is_registered(plugins[2])
    assert manager.implementation(plugins[2], "query") is None
    # The hook itself still calls the rest, last registered first (pluggy's order).
    assert manager.hook.query(ctx=None) == 4
    assert [impl.plugin for impl in manager.hook.query.get_hookimpls()] == [
        plugins[0],
        plugins[1],
        plugins[3],
        plugins[4],
    ]


def test_component_manager_reads_methods_an_instance_adds_as_pluggy_does() -> None:
    plugin = _Plugin(1)
    plugin.query = pmca.hookimpl(lambda ctx: 7)  # type: ignore[method-assign]
    for manager in (ComponentManager(PROJECT), pluggy.PluginManager(PROJECT)):
        manager.add_hookspecs(_Spec)
        manager.register(plugin, name="p")
        assert manager.hook.query(ctx=None) == 7


def test_deregistering_a_component_group_leaves_the_others_in_order() -> None:
    space = ParamSpace(environ={}, param_files=[], override_file="")
    for component in ("a", "b", "c"):
        for name in ("x", "y"):
            space.register("idx", component, name, type=int, default=1, help="h")
    space.register("idx", "b", "z", type=int, default=1, help="h", group="idx")
    assert space.deregister_group("idx", "b") == ["idx_b_x", "idx_b_y"]
    assert [p.full_name for p in space.params("idx", "b")] == ["idx_b_z"]
    space.register("idx", "b", "x", type=int, default=2, help="h")
    assert [p.full_name for p in space.params("idx", "b")] == ["idx_b_z", "idx_b_x"]
    assert [p.full_name for p in space.params("idx", "a")] == ["idx_a_x", "idx_a_y"]
    assert space.deregister_group("idx") == [
        "idx_a_x",
        "idx_a_y",
        "idx_c_x",
        "idx_c_y",
        "idx_b_z",
        "idx_b_x",
    ]
    assert space.params("idx") == []


def test_a_leak_made_by_a_component_that_failed_during_init_is_still_caught(
    install_framework, unique
) -> None:
    fw = unique("leakopen")
    leaky = component_source(fw, "leaky", fail_in="open").replace(
        "import pmca\n", "import pmca\nimport pmca.patcher as _leak_target\n", 1
    )
    leaky = leaky.replace(
        "    def open(self, ctx):\n",
        "    def open(self, ctx):\n        _leak_target.LEAKED_AT_OPEN = self\n",
        1,
    )
    install_framework(fw, {"leaky": leaky, "fine": component_source(fw, "fine")})
    import pmca.patcher

    session = pmca.Session(frameworks=[fw]).init()
    try:
        assert [f.component for f in session.failures(fw)] == ["leaky"]
        with pytest.raises(pmca.StaleReferenceError, match=r"LEAKED_AT_OPEN still refers"):
            session.finalize()
    finally:
        pmca.patcher.__dict__.pop("LEAKED_AT_OPEN", None)
    assert RUNTIME.sessions == 0


def test_importing_pmca_imports_only_what_is_used() -> None:
    child = run_python(
        textwrap.dedent(
            """
            import sys
            import pmca
            heavy = ("structlog", "asyncio", "importlib_metadata", "email.parser",
                     "pmca.runtime", "pmca.native", "pmca.cli", "pluggy", "attrs")
            print(sorted(name for name in heavy if name in sys.modules))
            pmca.Component, pmca.hookimpl, pmca.Query
            print("pmca.runtime" in sys.modules)
            with pmca.Session(frameworks=[]):
                pass
            print(sorted(n for n in ("structlog", "asyncio", "email.parser") if n in sys.modules))
            assert set(pmca.__all__) <= set(dir(pmca))
            try:
                pmca.no_such_name
            except AttributeError as exc:
                print(exc)
            """
        )
    )
    assert child.returncode == 0, child.stderr
    lines = child.stdout.splitlines()
    assert lines[0] == "[]"
    assert lines[1] == "False"  # a component's imports do not pull in the runtime
    assert lines[2] == "[]"  # nor does a session at the default verbosity
    assert lines[3] == "module 'pmca' has no attribute 'no_such_name'"
    assert sys.modules["pmca"].Session is pmca.session.Session


class _Base:
    @pmca.hookimpl
    def query(self, ctx: object) -> int:
        return 1

    @pmca.hookimpl
    def close(self, ctx: object) -> None:
        return None


class _Derived(_Base):
    def close(self, ctx: object) -> None:  # an override without the marker hides the hook
        return None

    @staticmethod
    @pmca.hookimpl
    def open(ctx: object) -> bool:
        return True

    @property
    def register(self) -> object:  # never evaluated by discovery
        raise AssertionError("a property was evaluated")


def test_component_manager_finds_the_hooks_pluggy_finds() -> None:
    def found(manager: pluggy.PluginManager) -> dict[str, list[str]]:
        manager.register(_Derived(), name="p")
        return {
            name: [impl.function.__name__ for impl in caller.get_hookimpls()]
            for name, caller in vars(manager.hook).items()
        }

    assert found(ComponentManager(PROJECT)) == found(pluggy.PluginManager(PROJECT))
    assert sorted(found(ComponentManager(PROJECT))) == ["open", "query"]


def test_a_load_owns_the_modules_it_added_even_when_others_left_meanwhile() -> None:
    from types import ModuleType

    from pmca.mca._open import _ModulesMark

    names = ["pmca_mark_before", "pmca_mark_first", "pmca_mark_second"]
    try:
        sys.modules[names[0]] = ModuleType(names[0])
        known = set(sys.modules)
        mark = _ModulesMark(known)
        sys.modules[names[1]] = ModuleType(names[1])
        assert mark.added() == [names[1]]  # the tail of sys.modules
        mark = _ModulesMark(known)
        del sys.modules[names[0]]  # something before the mark left: the tail shifted
        sys.modules[names[2]] = ModuleType(names[2])
        assert mark.added() == [names[2]]
    finally:
        for name in names:
            sys.modules.pop(name, None)


def test_a_component_registered_detached_is_callable_but_in_no_hook_until_attached() -> None:
    manager = ComponentManager(PROJECT)
    manager.add_hookspecs(_Spec)
    plugins = [_Plugin(index) for index in range(3)]
    for index, plugin in enumerate(plugins):
        assert manager.register_detached(plugin, f"p{index}") == f"p{index}"
    assert all(manager.is_registered(plugin) for plugin in plugins)
    assert manager.get_name(plugins[1]) == "p1"
    impl = manager.implementation(plugins[1], "query")
    assert impl is not None and impl.function(None) == 1
    assert manager.hook.query.get_hookimpls() == []
    with pytest.raises(ValueError, match="already registered"):
        manager.register_detached(_Plugin(9), "p0")
    assert manager.unregister(plugins[1]) is plugins[1]
    assert not manager.is_registered(plugins[1])
    manager.attach(plugins[0])
    manager.attach(plugins[2])
    assert [impl.plugin for impl in manager.hook.query.get_hookimpls()] == [plugins[0], plugins[2]]
    assert manager.hook.query(ctx=None) == 2
    assert manager.get_hookcallers(plugins[2]) == [manager.hook.query]
    manager.unregister(plugins[2])
    assert manager.hook.query(ctx=None) == 0


def test_a_detached_registration_checks_the_implementation_against_its_spec() -> None:
    class Wrong:
        @pmca.hookimpl
        def query(self, ctx: object, extra: object) -> None: ...

    manager = ComponentManager(PROJECT)
    manager.add_hookspecs(_Spec)
    with pytest.raises(pluggy.PluginValidationError, match="extra"):
        manager.register_detached(Wrong(), "wrong")
    assert manager.register_detached(_Plugin(1), "wrong") == "wrong"


def test_only_selected_components_are_in_the_framework_hooks(install_framework, unique) -> None:
    fw = unique("hooked")
    install_framework(
        fw,
        {
            name: component_source(fw, name, priority=priority)
            for name, priority in (("low", 10), ("high", 50), ("mid", 30))
        },
    )
    with pmca.Session(frameworks=[fw]):
        state = RUNTIME.frameworks[fw]
        hooked = {impl.plugin_name for impl in state.hook().query.get_hookimpls()}
        assert hooked == {"high"}
    assert state.pm.hook.query.get_hookimpls() == []


def test_built_in_framework_declarations_are_imported_only_when_needed() -> None:
    result = run_python(
        """
        import sys
        import pmca
        from pmca.runtime import RUNTIME
        with pmca.Session(frameworks=["patcher"]):
            names = list(RUNTIME.catalog.frameworks)
            assert names[:4] == ["patcher", "memory", "rcache", "btl"], names
            assert "pmca.btl._framework" not in sys.modules
            assert "pmca.rcache._framework" not in sys.modules
            assert RUNTIME.catalog.get("rcache").depends == ("memory",)
            assert "pmca.rcache._framework" in sys.modules
        print("ok")
        """
    )
    assert result.stdout.strip().endswith("ok"), result.stderr


def test_built_in_frameworks_depend_on_built_in_ones_only_without_a_cycle() -> None:
    names = {builtin_name(target) for target in BUILTIN_FRAMEWORKS}
    for target in BUILTIN_FRAMEWORKS:
        assert set(load_builtin(target).depends) <= names, target
    assert set(Catalog.discover().dependency_order(sorted(names))) == names
