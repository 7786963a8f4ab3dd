"""The example third-party distribution, found through its installed entry points."""

from __future__ import annotations

import importlib.metadata

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
        assert sorted(
            style for styles in session_hook(session).greeting_styles() for style in styles
        ) == ["loud", "plain"]


def session_hook(session: pmca.Session):  # type: ignore[no-untyped-def]
    from pmca.runtime import RUNTIME

    return RUNTIME.frameworks["greet"].hook()


def test_parameters_and_selection(hello_installed, pmca_env) -> None:
    mca = {"greet": "hello", "greet_hello_greeting": "bonjour"}
    with pmca.Session(mca=mca, frameworks=["greet"]) as session:
        assert [m.greet("ada") for m in session.modules("greet")] == ["bonjour, ada"]
        assert str(session.param("greet_hello_greeting").origin) == "command line"
