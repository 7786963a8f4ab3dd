"""Every way a component can fail is recorded, named and isolated."""

from __future__ import annotations

import pytest

import pmca
from tests.conftest import InstallPlugin, component_source, framework_source


def setup(
    install_plugin: InstallPlugin,
    fw: str,
    bad_name: str,
    bad_source: str,
    *,
    target: str = "TestComponent",
    policy: str = "multi",
) -> str:
    events = f"{fw}_decl"
    install_plugin(
        f"dist-{fw}",
        entry_points={
            "pmca.frameworks": {fw: f"{events}:FRAMEWORK"},
            f"pmca.{fw}": {
                "good": f"{fw}_good:TestComponent",
                bad_name: f"{fw}_{bad_name}:{target}",
            },
        },
        modules={
            events: framework_source(fw, policy=policy),
            f"{fw}_good": component_source(fw, "good", events_module=events),
            f"{fw}_{bad_name}": bad_source,
        },
        version="2.0.1",
    )
    return events


def only_failure(session: pmca.Session, fw: str) -> pmca.ComponentFailure:
    failures = session.failures(fw)
    assert len(failures) == 1, failures
    return failures[0]


def check_failure(failure: pmca.ComponentFailure, fw: str, name: str, hook: str, text: str) -> None:
    assert failure.framework == fw and failure.component == name and failure.hook == hook
    assert failure.distribution == f"dist-{fw} 2.0.1"
    assert f"pmca.{fw}:{name}" in failure.location
    assert text in str(failure)


@pytest.mark.parametrize(
    ("source", "target", "hook", "text"),
    [
        ("import nonexistent_module_zz\n", "TestComponent", "import", "nonexistent_module_zz"),
        ("x = (\n", "TestComponent", "import", "SyntaxError"),
        ("TestComponent = 42\n", "TestComponent", "validate", "is not a pmca component"),
        ("", "Missing", "import", "AttributeError"),
    ],
)
def test_import_and_type_failures(
    install_plugin, unique, source, target, hook, text, capsys
) -> None:
    fw = unique("imp")
    setup(install_plugin, fw, "bad", source, target=target)
    with pmca.Session(frameworks=[fw]) as session:
        check_failure(only_failure(session, fw), fw, "bad", hook, text)
        assert [i.name for i in session.components(fw)] == ["good"]
    assert "component failed and was skipped" in capsys.readouterr().err


def test_wrong_api_major_is_rejected_with_a_reason(install_plugin, unique) -> None:
    fw = unique("api")
    setup(install_plugin, fw, "old", component_source(fw, "old", api_version="2.3.0"))
    with pmca.Session(frameworks=[fw]) as session:
        failure = only_failure(session, fw)
        check_failure(failure, fw, "old", "validate", "written for")
        assert "API 2.3.0" in failure.message and "API 1.0.0" in failure.message


def test_same_major_and_minor_other_patch_is_accepted(install_plugin, unique) -> None:
    fw = unique("minor")
    setup(install_plugin, fw, "newer", component_source(fw, "newer", api_version="1.0.7"))
    with pmca.Session(frameworks=[fw]) as session:
        assert session.failures(fw) == []
        assert sorted(i.name for i in session.components(fw)) == ["good", "newer"]


def test_wrong_name_or_framework_is_rejected(install_plugin, unique) -> None:
    fw = unique("name")
    setup(install_plugin, fw, "alias", component_source(fw, "other"))
    with pmca.Session(frameworks=[fw]) as session:
        check_failure(only_failure(session, fw), fw, "alias", "validate", "declares name 'other'")


@pytest.mark.parametrize("hook", ["register", "open", "query"])
def test_raising_hooks_are_isolated(install_plugin, unique, hook: str) -> None:
    fw = unique(hook)
    events = setup(install_plugin, fw, "bad", component_source(fw, "bad", fail_in=hook))
    with pmca.Session(frameworks=[fw]) as session:
        failure = only_failure(session, fw)
        check_failure(failure, fw, "bad", hook, f"boom in {hook}")
        assert "Traceback" in failure.traceback
        assert [i.name for i in session.components(fw)] == ["good"]
        assert session.module(fw) is not None
        # A component that failed has left no parameters behind.
        with pytest.raises(pmca.ParamError):
            session.param(f"{fw}_bad_priority")
    import importlib

    log = importlib.import_module(events).EVENTS
    assert ("close", f"{fw}/good") in log


def test_raising_close_does_not_stop_the_others(install_plugin, unique) -> None:
    fw = unique("close")
    events = setup(
        install_plugin,
        fw,
        "bad",
        component_source(fw, "bad", fail_in="close", events_module=f"{fw}_decl"),
    )
    session = pmca.Session(frameworks=[fw]).init()
    session.finalize()
    import importlib

    from pmca.runtime import RUNTIME

    log = importlib.import_module(events).EVENTS
    assert ("close", f"{fw}/good") in log and ("close", f"{fw}/bad") in log
    assert [f.component for f in RUNTIME.close_failures] == ["bad"]
    assert RUNTIME.close_failures[0].hook == "close"


@pytest.mark.parametrize(
    ("setting", "shown"),
    [
        ("all", True),
        ("none", False),
        ("{fw}", True),
        ("^{fw}", False),
        ("{fw}/bad", True),
        ("{fw}/good", False),
        ("0", False),
        ("true", True),
    ],
)
def test_show_load_errors(install_plugin, unique, capsys, setting: str, shown: bool) -> None:
    fw = unique("show")
    setup(install_plugin, fw, "bad", "import nonexistent_zz\n")
    mca = {"mca_base_component_show_load_errors": setting.format(fw=fw)}
    with pmca.Session(mca=mca, frameworks=[fw]) as session:
        assert len(session.failures(fw)) == 1  # recorded either way
    assert ("component failed and was skipped" in capsys.readouterr().err) is shown


def test_a_broken_third_party_framework_is_recorded(install_plugin, unique) -> None:
    fw = unique("brokenfw")
    install_plugin(
        f"dist-{fw}",
        entry_points={"pmca.frameworks": {fw: f"{fw}_decl:NOT_THERE"}},
        modules={f"{fw}_decl": "X = 1\n"},
    )
    from pmca.runtime import RUNTIME

    with pmca.Session(frameworks=[]):
        failures = RUNTIME.catalog.failures
        assert [f.name for f in failures] == [fw]
        assert "AttributeError" in failures[0].reason
    with pytest.raises(pmca.FrameworkError, match=f"framework '{fw}' is disabled: .*NOT_THERE"):
        pmca.Session(frameworks=[fw]).init()
