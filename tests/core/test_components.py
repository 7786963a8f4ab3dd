"""Discovery, selection and failure isolation through real entry points."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

import pmca
from pmca import SelectionError
from tests.conftest import component_source, framework_source


def names(session: pmca.Session, fw: str) -> list[str]:
    return [info.name for info in session.components(fw)]


def test_discovery_through_a_real_distribution(install_framework, unique) -> None:
    fw = unique("disc")
    install_framework(
        fw,
        {"a": component_source(fw, "a"), "b": component_source(fw, "b")},
        policy="multi",
    )
    with pmca.Session(frameworks=[fw]) as session:
        infos = session.components(fw)
        assert [i.name for i in infos] == ["a", "b"]
        assert all(f"pmca.{fw}:" in i.location for i in infos)
        assert all(i.distribution == f"dist-{fw} 0.1.0" for i in infos)


def test_single_keeps_the_best_priority(install_framework, unique) -> None:
    fw = unique("single")
    install_framework(
        fw,
        {
            "low": component_source(fw, "low", priority=5),
            "high": component_source(fw, "high", priority=50),
            "mid": component_source(fw, "mid", priority=20),
        },
    )
    with pmca.Session(frameworks=[fw]) as session:
        assert names(session, fw) == ["high"]
        assert type(session.module(fw)).name == "high"  # type: ignore[attr-defined]


def test_multi_keeps_everything_best_first(install_framework, unique) -> None:
    fw = unique("multi")
    install_framework(
        fw,
        {
            "low": component_source(fw, "low", priority=5),
            "high": component_source(fw, "high", priority=50),
            "off": component_source(fw, "off", available=False),
        },
        policy="multi",
    )
    with pmca.Session(frameworks=[fw]) as session:
        assert names(session, fw) == ["high", "low"]
        assert [type(m).name for m in session.modules(fw)] == ["high", "low"]  # type: ignore[attr-defined]
        assert session.failures(fw) == []  # "not available" is silent, not a failure


@pytest.mark.parametrize("policy", ["single", "multi"])
def test_include_and_exclude_lists(install_framework, unique, policy: str) -> None:
    fw = unique("incl")
    install_framework(
        fw,
        {n: component_source(fw, n, priority=p) for n, p in [("a", 1), ("b", 2), ("c", 3)]},
        policy=policy,
    )
    with pmca.Session(mca={fw: "a,b"}, frameworks=[fw]) as session:
        assert names(session, fw) == (["b"] if policy == "single" else ["b", "a"])
    with pmca.Session(mca={fw: "^c"}, frameworks=[fw]) as session:
        assert names(session, fw) == (["b"] if policy == "single" else ["b", "a"])
    with pmca.Session(mca={fw: "^b,c"}, frameworks=[fw]) as session:
        assert names(session, fw) == ["a"]


def test_unselected_components_are_never_imported(install_framework, unique) -> None:
    fw = unique("lazy")
    bomb = "raise SystemExit('this component must not be imported')\n"
    install_framework(fw, {"good": component_source(fw, "good"), "bomb": bomb})
    with pmca.Session(mca={fw: "good"}, frameworks=[fw]) as session:
        assert names(session, fw) == ["good"]
    assert f"{fw}_bomb_mod" not in sys.modules
    with pmca.Session(mca={fw: "^bomb"}, frameworks=[fw]) as session:
        assert names(session, fw) == ["good"]
    assert f"{fw}_bomb_mod" not in sys.modules


def test_unknown_included_component_is_an_error(install_framework, unique) -> None:
    fw = unique("unk")
    install_framework(fw, {"a": component_source(fw, "a")})
    with pytest.raises(SelectionError, match=r"nope.*available: a"):
        pmca.Session(mca={fw: "a,nope"}, frameworks=[fw]).init()


def test_mixed_include_exclude_is_an_error(install_framework, unique) -> None:
    fw = unique("mixed")
    install_framework(fw, {"a": component_source(fw, "a")})
    with pytest.raises(SelectionError, match="may only appear once"):
        pmca.Session(mca={fw: "a,^b"}, frameworks=[fw]).init()


def test_aliases_select_the_target(install_framework, unique) -> None:
    fw = unique("alias")
    decl = framework_source(fw).replace(
        "base=Base,", "base=Base, aliases={'vader': pmca.Alias('sm', deprecated=True)},"
    )
    install_framework(
        fw,
        {
            "sm": component_source(fw, "sm", priority=1),
            "tcp": component_source(fw, "tcp", priority=9),
        },
        declaration=decl,
    )
    with pmca.Session(mca={fw: "vader"}, frameworks=[fw]) as session:
        assert names(session, fw) == ["sm"]


def test_drop_in_directory(install_framework, unique, tmp_path: Path) -> None:
    fw = unique("drop")
    install_framework(fw, {})
    drop = tmp_path / "components"
    (drop / f"pmca_{fw}_pkg").mkdir(parents=True)
    (drop / f"pmca_{fw}_file.py").write_text(component_source(fw, "file", priority=3))
    (drop / f"pmca_{fw}_pkg" / "__init__.py").write_text(component_source(fw, "pkg", priority=4))
    (drop / f"pmca_{fw}_notes.txt").write_text("not a component")
    (drop / "pmca_other_x.py").write_text("raise SystemExit('wrong framework')")
    with (
        pytest.warns(pmca.ParamWarning, match="'/nonexistent', which is not a directory"),
        pmca.Session(
            mca={"mca_base_component_path": f"/nonexistent:{drop}"}, frameworks=[fw]
        ) as session,
    ):
        infos = session.components(fw)
        assert [i.name for i in infos] == ["pkg"]
        assert infos[0].location == f"drop-in {drop / f'pmca_{fw}_pkg'}"
    try:
        with pmca.Session(
            mca={"mca_base_component_path": str(drop), fw: "file"}, frameworks=[fw]
        ) as session:
            assert names(session, fw) == ["file"]
    finally:
        for module in (f"pmca_{fw}_file", f"pmca_{fw}_pkg"):
            sys.modules.pop(module, None)


def test_entry_point_beats_drop_in_of_the_same_name(install_framework, unique, tmp_path) -> None:
    fw = unique("shadow")
    install_framework(fw, {"a": component_source(fw, "a", priority=1)})
    drop = tmp_path / "drop"
    drop.mkdir()
    (drop / f"pmca_{fw}_a.py").write_text("raise SystemExit('shadowed; never imported')")
    with (
        pytest.warns(pmca.ComponentWarning, match=f"component {fw}/a is offered twice"),
        pmca.Session(mca={"mca_base_component_path": str(drop)}, frameworks=[fw]) as session,
    ):
        assert "entry point" in session.components(fw)[0].location
