"""What a component author gets wrong first is an error that says what and where."""

from __future__ import annotations

import textwrap

import pytest

import pmca
from tests.conftest import InstallPlugin, component_source, framework_source


def stub_source(framework: str, name: str, hooks: str, *, api_version: str = "1.0.0") -> str:
    """A component whose hook implementations are ``hooks`` (methods, unindented)."""
    return textwrap.dedent(
        f"""
        import pmca

        class TestComponent(pmca.Component):
            framework = {framework!r}
            name = {name!r}
            version = "1.0.0"
            api_version = {api_version!r}
        """
    ) + textwrap.indent(textwrap.dedent(hooks), "    ")


def install(install_plugin: InstallPlugin, fw: str, stub: str, *, policy: str = "multi") -> None:
    """Framework ``fw`` with a working component ``good`` and ``stub`` from ``stub``."""
    install_plugin(
        f"dist-{fw}",
        entry_points={
            "pmca.frameworks": {fw: f"{fw}_decl:FRAMEWORK"},
            f"pmca.{fw}": {"good": f"{fw}_good:TestComponent", "stub": f"{fw}_stub:TestComponent"},
        },
        modules={
            f"{fw}_decl": framework_source(fw, policy=policy),
            f"{fw}_good": component_source(fw, "good"),
            f"{fw}_stub": stub,
        },
    )


MISSPELLED = """
@pmca.hookimpl
def qurey(self, ctx):
    return pmca.Query(priority=99, module=object())
"""


def test_a_misspelled_hook_is_a_failure_naming_the_closest_hook(
    install_plugin, unique, capsys
) -> None:
    fw = unique("spell")
    install(install_plugin, fw, stub_source(fw, "stub", MISSPELLED))
    with pmca.Session(frameworks=[fw]) as session:
        (failure,) = session.failures(fw)
        assert [c.name for c in session.components(fw)] == ["good"]
    assert (failure.component, failure.hook, failure.error_type) == (
        "stub",
        "validate",
        "PluginValidationError",
    )
    assert failure.message == (
        f"component {fw}/stub implements 'qurey', which is not a hook of framework "
        f"{fw!r} (did you mean 'query'?)"
    )
    assert failure.message in capsys.readouterr().err


def test_an_optional_hook_of_another_name_is_allowed(install_plugin, unique) -> None:
    """pluggy's own escape hatch: ``optionalhook=True`` is never checked against the specs."""
    fw = unique("optional")
    hooks = MISSPELLED.replace("@pmca.hookimpl", "@pmca.hookimpl(optionalhook=True)")
    install(install_plugin, fw, stub_source(fw, "stub", hooks))
    with pmca.Session(frameworks=[fw]) as session:
        assert session.failures(fw) == []


def test_an_unknown_hook_far_from_every_name_lists_the_hooks(install_plugin, unique) -> None:
    fw = unique("far")
    hooks = "@pmca.hookimpl\ndef zzzzzz(self):\n    pass\n"
    install(install_plugin, fw, stub_source(fw, "stub", hooks))
    with pmca.Session(frameworks=[fw]) as session:
        (failure,) = session.failures(fw)
    assert failure.message == (
        f"component {fw}/stub implements 'zzzzzz', which is not a hook of framework "
        f"{fw!r} (its hooks: close, open, query, register)"
    )


def test_a_newer_minor_api_is_refused_with_both_versions(install_plugin, unique) -> None:
    fw = unique("minor")
    install(install_plugin, fw, component_source(fw, "stub", api_version="1.5.0"))
    with pmca.Session(frameworks=[fw]) as session:
        (failure,) = session.failures(fw)
    assert (failure.component, failure.hook) == ("stub", "validate")
    assert failure.message == (
        f"component {fw}/stub was written for {fw} API 1.5.0, but this framework "
        f"implements API 1.0.0 (a component needs the same major version and a minor "
        f"version no newer than the framework's: 1.0 at most)"
    )


DECLINES = """
@pmca.hookimpl
def query(self, ctx):
    return None
"""


def _no_module(fw: str, selection: str) -> str:
    """The error ``session.module(fw)`` raises with ``fw=<selection>``."""
    with (
        pmca.Session(mca={fw: selection}, frameworks=[fw]) as session,
        pytest.raises(pmca.FrameworkError) as raised,
    ):
        session.module(fw)
    return str(raised.value)


def test_no_selected_module_lists_every_failure_and_decline(install_plugin, unique) -> None:
    fw = unique("none")
    install(install_plugin, fw, stub_source(fw, "stub", DECLINES), policy="single")
    assert _no_module(fw, "stub") == (
        f"framework {fw!r} has no selected module: {fw}/stub: "
        "query returned None (declined selection)"
    )


def test_no_selected_module_names_failures_too(install_plugin, unique) -> None:
    fw = unique("nonefail")
    install(install_plugin, fw, stub_source(fw, "stub", DECLINES), policy="single")
    install_plugin(
        f"dist-{fw}-more",
        entry_points={f"pmca.{fw}": {"broken": f"{fw}_broken:TestComponent"}},
        modules={f"{fw}_broken": component_source(fw, "broken", fail_in="query")},
    )
    assert _no_module(fw, "stub,broken") == (
        f"framework {fw!r} has no selected module: {fw}/broken: query failed: "
        f"RuntimeError: boom in query; {fw}/stub: query returned None (declined selection)"
    )


@pytest.mark.parametrize(
    ("hooks", "reason"),
    [
        (DECLINES, "query returned None (declined selection)"),
        (
            "@pmca.hookimpl\ndef open(self, ctx):\n    raise pmca.NotAvailable('no card')\n",
            "not available: no card",
        ),
    ],
    ids=["declines", "not-available"],
)
def test_a_requested_component_dropped_says_why_by_default(
    install_plugin, unique, capsys, hooks, reason
) -> None:
    fw = unique("asked")
    install(install_plugin, fw, stub_source(fw, "stub", hooks))
    with pmca.Session(mca={fw: "good,stub"}, frameworks=[fw]) as session:
        assert [c.name for c in session.components(fw)] == ["good"]
    err = capsys.readouterr().err
    assert (
        f"[pmca:{fw}/stub] error: requested component is not used "
        f"reason={reason!r} requested='{fw}=good,stub'"
    ) in err.splitlines()


def test_a_requested_btl_that_declines_says_why(install_plugin, unique, capsys) -> None:
    install_plugin(
        "dist-btl-stub",
        entry_points={"pmca.btl": {"stub": "btl_stub_declines:TestComponent"}},
        modules={"btl_stub_declines": stub_source("btl", "stub", DECLINES)},
    )
    with pmca.Session(mca={"btl": "self,stub"}, frameworks=["btl"]) as session:
        assert [c.name for c in session.components("btl")] == ["self"]
    assert (
        "[pmca:btl/stub] error: requested component is not used "
        "reason='query returned None (declined selection)' requested='btl=self,stub'"
    ) in capsys.readouterr().err.splitlines()
