"""A broken framework declaration disables the frameworks involved and nothing else."""

from __future__ import annotations

import json
import textwrap
import warnings
from collections.abc import Callable

import pytest

import pmca
from pmca.runtime import RUNTIME
from tests.conftest import InstallPlugin, framework_source

COMPONENT = textwrap.dedent(
    """
    import pmca

    class TestComponent(pmca.Component):
        framework = {fw!r}
        name = {name!r}
        version = "1.0.0"
        api_version = "1.0.0"

        @pmca.hookimpl
        def query(self, ctx):
            return {query}
    """
)


def component(fw: str, name: str, query: str = "pmca.Query(priority=10, module=object())") -> str:
    return COMPONENT.format(fw=fw, name=name, query=query)


def install_frameworks(
    install_plugin: InstallPlugin, dist: str, declarations: dict[str, tuple[str, ...]]
) -> None:
    """One distribution declaring each framework (name -> depends), each with a component."""
    modules: dict[str, str] = {}
    points: dict[str, dict[str, str]] = {"pmca.frameworks": {}}
    for fw, depends in declarations.items():
        modules[f"{fw}_decl"] = framework_source(fw, depends=depends)
        modules[f"{fw}_one"] = component(fw, "one")
        points["pmca.frameworks"][fw] = f"{fw}_decl:FRAMEWORK"
        points[f"pmca.{fw}"] = {"one": f"{fw}_one:TestComponent"}
    install_plugin(dist, entry_points=points, modules=modules)


def test_a_dependency_cycle_disables_only_the_frameworks_on_it(
    install_plugin: InstallPlugin, unique: Callable[[str], str], cli
) -> None:
    cyca, cycb, after, fine = unique("cyca"), unique("cycb"), unique("after"), unique("fine")
    install_frameworks(
        install_plugin,
        f"dist-{cyca}",
        {cyca: (cycb,), cycb: (cyca,), after: (cyca,), fine: ("memory",)},
    )
    # A default session opens every other framework, and they work.
    with pmca.Session() as session:
        assert {"memory", "patcher", fine} <= set(RUNTIME.frameworks)
        assert [c.name for c in session.components(fine)] == ["one"]
        assert session.module("memory") is not None
        reasons = {f.name: f.reason for f in RUNTIME.catalog.failures}
    cycle = f"framework dependency cycle: {cyca} -> {cycb} -> {cyca}"
    assert reasons[cyca] == f"FrameworkError: {cycle}"
    assert reasons[
        cycb
    ] == f"FrameworkError: framework dependency cycle: {cycb} -> {cyca} -> {cycb}" or (
        reasons[cycb] == f"FrameworkError: {cycle}"
    )
    assert reasons[after] == f"FrameworkError: depends on framework {cyca!r}, which is disabled"
    with pytest.raises(pmca.FrameworkError, match=f"framework '{cyca}' is disabled: .*cycle"):
        pmca.Session(frameworks=[cyca]).init()
    # pmca info reports it like a failed component and succeeds.
    result = cli("info")
    assert result.code == 0, result.err
    assert f"(framework failed to load) FrameworkError: {cycle}" in result.out
    parsable = cli("info", "--parsable", "--show-failed")
    assert (
        f'framework:{after}:failed:"FrameworkError: depends on framework '
        f"'{cyca}', which is disabled\"" in parsable.lines
    )


def test_a_missing_dependency_names_who_needs_it(
    install_plugin: InstallPlugin, unique: Callable[[str], str]
) -> None:
    needy, nosuch = unique("needy"), unique("nosuchfw")
    install_frameworks(install_plugin, f"dist-{needy}", {needy: (nosuch,)})
    with pmca.Session() as session:
        assert needy not in RUNTIME.frameworks
        assert session.module("memory") is not None
        (failure,) = [f for f in RUNTIME.catalog.failures if f.name == needy]
    assert failure.reason == (
        f"FrameworkError: depends on framework {nosuch!r}, which is not installed"
    )
    assert f"distribution dist-{needy} 0.1.0" in failure.location


def test_two_distributions_declaring_one_framework_disable_both(
    install_plugin: InstallPlugin, unique: Callable[[str], str]
) -> None:
    twin = unique("twin")
    install_frameworks(install_plugin, f"dist-a-{twin}", {twin: ()})
    install_frameworks(install_plugin, f"dist-b-{twin}", {twin: ()})
    with pmca.Session() as session:
        assert twin not in RUNTIME.frameworks
        assert session.module("patcher") is not None
        failures = [f for f in RUNTIME.catalog.failures if f.name == twin]
    assert len(failures) == 2
    for failure, other in zip(failures, reversed(failures), strict=True):
        assert "duplicate framework name, also" in failure.reason
        assert other.location in failure.reason


def test_a_third_party_framework_cannot_take_a_builtin_name(
    install_plugin: InstallPlugin,
) -> None:
    install_plugin(
        "dist-memory-impostor",
        entry_points={"pmca.frameworks": {"memory": "impostor_decl:FRAMEWORK"}},
        modules={"impostor_decl": framework_source("memory")},
    )
    with pmca.Session(frameworks=["memory"]) as session:
        assert session.components("memory")
        (failure,) = [f for f in RUNTIME.catalog.failures if f.name == "memory"]
    assert failure.reason == (
        "FrameworkError: distribution dist-memory-impostor 0.1.0 declares a framework named "
        "'memory', the name of pmca's built-in framework (built-in (pmca.memory._framework:"
        "FRAMEWORK)): the built-in memory is used, this declaration is ignored"
    )
    assert failure.distribution == "dist-memory-impostor 0.1.0"
    assert failure.clash == "built-in (pmca.memory._framework:FRAMEWORK)"


def test_a_third_party_btl_framework_is_reported_as_a_clash_not_as_the_builtin_failing(
    install_plugin: InstallPlugin, cli
) -> None:
    """``pmca info`` names the distribution and the clash; the built-in btl still works."""
    install_plugin(
        "pmca-otherbtl",
        version="0.3.0",
        entry_points={"pmca.frameworks": {"btl": "otherbtl_decl:FRAMEWORK"}},
        modules={"otherbtl_decl": framework_source("btl")},
    )
    result = cli("info", "--show-failed")
    assert result.code == 0, result.err
    (line,) = [x for x in result.out.splitlines() if x.strip().startswith("MCA btl: (")]
    assert "(framework failed to load)" not in line
    assert "(third-party framework ignored: name clash)" in line
    assert "distribution pmca-otherbtl 0.3.0 declares a framework named 'btl'" in line
    assert "the built-in btl is used" in line
    summary = cli("info")
    assert (
        "Failed to load: 1 (framework btl from distribution pmca-otherbtl 0.3.0, a name clash "
        "with the built-in btl)" in " ".join(summary.out.split())
    )
    assert "MCA btl: self" in summary.out  # the built-in btl's components are all there
    parsable = cli("info", "--show-failed", "--parsable").out.splitlines()
    assert "framework:btl:distribution:pmca-otherbtl 0.3.0" in parsable
    assert 'framework:btl:clashes-with:"built-in (pmca.btl._framework:FRAMEWORK)"' in parsable
    report = json.loads(cli("info", "--json", "--show-failed").out)
    (failure,) = report["framework_failures"]
    assert failure["distribution"] == "pmca-otherbtl 0.3.0"
    assert failure["clashes_with"] == "built-in (pmca.btl._framework:FRAMEWORK)"
    # The built-in btl's parameters are still checked: its name is not disabled.
    with (
        pytest.warns(pmca.ParamWarning, match="btl_tcp_exclusivty"),
        pmca.Session(frameworks=["btl"], mca={"btl_tcp_exclusivty": "5"}),
    ):
        pass


def test_a_component_offered_twice_warns_naming_both(
    install_plugin: InstallPlugin, unique: Callable[[str], str], tmp_path, cli
) -> None:
    fw = unique("dupfw")
    install_frameworks(install_plugin, f"dist-{fw}", {fw: ()})
    drop_ins = tmp_path / "drop-ins"
    drop_ins.mkdir()
    (drop_ins / f"pmca_{fw}_one.py").write_text(component(fw, "one"))
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        with pmca.Session(mca={"mca_base_component_path": str(drop_ins)}, frameworks=[fw]) as s:
            (info,) = s.components(fw)
    assert info.location.startswith(f"entry point pmca.{fw}:one")
    texts = [str(w.message) for w in caught if issubclass(w.category, pmca.ComponentWarning)]
    expected = (
        f"component {fw}/one is offered twice: using {info.location}; ignoring drop-in "
        f"{drop_ins / f'pmca_{fw}_one.py'} (precedence: built-in, then entry points in "
        f"sys.path order, then drop-ins in mca_base_component_path order)"
    )
    assert texts == [expected]
    result = cli("info", "--mca", "mca_base_component_path", str(drop_ins))
    assert result.code == 0
    assert f"pmca info: warning: {expected}" in result.err.splitlines()


@pytest.mark.parametrize(
    ("query", "why"),
    [
        ("None", "query returned None (declined selection)"),
        ("pmca.Query(priority=1, module=None)", "query returned None (declined selection)"),
    ],
)
def test_a_requested_component_that_declines_is_reported(
    install_plugin: InstallPlugin,
    unique: Callable[[str], str],
    capsys: pytest.CaptureFixture[str],
    query: str,
    why: str,
) -> None:
    fw = unique("shy")
    install_plugin(
        f"dist-{fw}",
        entry_points={
            "pmca.frameworks": {fw: f"{fw}_decl:FRAMEWORK"},
            f"pmca.{fw}": {"one": f"{fw}_one:TestComponent", "two": f"{fw}_two:TestComponent"},
        },
        modules={
            f"{fw}_decl": framework_source(fw),
            f"{fw}_one": component(fw, "one", query),
            f"{fw}_two": component(fw, "two"),
        },
    )
    capsys.readouterr()
    with pmca.Session(mca={fw: "^two"}, frameworks=[fw]) as session:  # not asked for: quiet
        assert session.components(fw) == []
    assert "requested component" not in capsys.readouterr().err
    with pmca.Session(mca={fw: "one,two"}, frameworks=[fw]) as session:  # two is used: said too
        assert [c.name for c in session.components(fw)] == ["two"]
    assert f"[pmca:{fw}/one] error: requested component is not used" in capsys.readouterr().err
    with pmca.Session(mca={fw: "one"}, frameworks=[fw]) as session:
        assert session.components(fw) == []
        assert RUNTIME.frameworks[fw].declined == {"one": why}
    err = capsys.readouterr().err
    assert (
        f"[pmca:{fw}/one] error: requested component is not used reason={why!r} "
        f"requested='{fw}=one'" in err.splitlines()
    )
    # Open MPI's syslog destination: the same report leaves stderr alone.
    with pmca.Session(mca={fw: "one", "mca_base_verbose": "syslog"}, frameworks=[fw]):
        pass
    assert "requested component" not in capsys.readouterr().err


def test_doctor_reports_a_disabled_framework_and_goes_on(
    install_plugin: InstallPlugin, unique: Callable[[str], str]
) -> None:
    from pmca.cli import _doctor

    cyca, cycb = unique("cyca"), unique("cycb")
    install_frameworks(install_plugin, f"dist-{cyca}", {cyca: (cycb,), cycb: (cyca,)})
    section = _doctor.Section("Frameworks and components")
    registered = _doctor._inventory_lines(section)
    assert {"memory", "patcher"} <= set(registered)
    warned = {c.name: c for c in section.checks if c.status == "warn"}
    assert f"framework {cyca}" in warned and f"framework {cycb}" in warned
    assert "dependency cycle" in warned[f"framework {cyca}"].detail
    assert not [c for c in section.checks if c.status == "fail"]


def test_two_distributions_offering_one_component_first_on_sys_path_wins(
    install_plugin: InstallPlugin, unique: Callable[[str], str]
) -> None:
    fw = unique("twocomp")
    install_frameworks(install_plugin, f"dist-{fw}", {fw: ()})
    # Installed second, so prepended to sys.path last: first on sys.path.
    install_plugin(
        f"dist-other-{fw}",
        entry_points={f"pmca.{fw}": {"one": f"{fw}_other:TestComponent"}},
        modules={f"{fw}_other": component(fw, "one")},
    )
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        with pmca.Session(frameworks=[fw]) as session:
            (info,) = session.components(fw)
    assert info.distribution == f"dist-other-{fw} 0.1.0"
    (text,) = [str(w.message) for w in caught if issubclass(w.category, pmca.ComponentWarning)]
    assert text.startswith(f"component {fw}/one is offered twice: using entry point pmca.{fw}:one")
    assert f"(distribution dist-other-{fw} 0.1.0); ignoring entry point" in text
    assert f"(distribution dist-{fw} 0.1.0)" in text
