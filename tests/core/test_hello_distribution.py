"""The example third-party distribution, found through its installed entry points."""

from __future__ import annotations

import importlib.metadata
import subprocess
import sys

import pytest

import pmca


@pytest.fixture
def hello_installed() -> None:
    try:
        importlib.metadata.distribution("pmca-hello")
    except importlib.metadata.PackageNotFoundError:
        pytest.skip("examples/pmca-hello is not installed in this environment")


def test_framework_and_components_from_entry_points(hello_installed, pmca_env) -> None:
    with pmca.Session(frameworks=["greet"]) as session:
        infos = session.components("greet")
        assert [i.name for i in infos] == ["hello", "shout"]
        assert all(i.distribution == "pmca-hello 1.2.0" for i in infos)
        assert [m.greet("ada") for m in session.modules("greet")] == ["hi, ada", "HEY, ADA!"]
        greet = session.framework("greet")
        assert sorted(style for styles in greet.hook.greeting_styles() for style in styles) == [
            "loud",
            "plain",
        ]
        assert [c.name for c in greet.components()] == ["hello", "shout"]
    with pytest.raises(pmca.SessionError):
        greet.hook  # noqa: B018 - the handle is only valid while the session is


def test_framework_hooks_only_reach_selected_components(hello_installed, pmca_env) -> None:
    with pmca.Session(mca={"greet": "hello"}, frameworks=["greet"]) as session:
        assert session.framework("greet").hook.greeting_styles() == [["plain"]]
    with (
        pmca.Session(frameworks=["memory"]) as session,
        pytest.raises(pmca.FrameworkError, match="'greet' is not open"),
    ):
        session.framework("greet")


def test_the_example_runs(hello_installed) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "pmca_hello", "ada"],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines() == ["hi, ada", "HEY, ADA!", "styles: loud, plain"]


def test_parameters_and_selection(hello_installed, pmca_env) -> None:
    mca = {"greet": "hello", "greet_hello_greeting": "bonjour"}
    with pmca.Session(mca=mca, frameworks=["greet"]) as session:
        assert [m.greet("ada") for m in session.modules("greet")] == ["bonjour, ada"]
        assert str(session.param("greet_hello_greeting").origin) == "command line"
