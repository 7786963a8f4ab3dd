"""Structured logging: per framework and component, verbosity from parameters."""

from __future__ import annotations

import logging

import pytest
import structlog

import pmca
from pmca.runtime import RUNTIME
from pmca.testing import run_python
from tests.conftest import component_source


def test_importing_pmca_configures_nothing() -> None:
    child = run_python(
        """
        import logging, structlog
        root_handlers = list(logging.getLogger().handlers)
        import pmca, pmca.memory, pmca.native, pmca.patcher
        assert not structlog.is_configured(), "structlog was configured"
        assert logging.getLogger().handlers == root_handlers, "root handlers changed"
        assert logging.getLogger().level == logging.WARNING
        print("clean")
        """
    )
    assert child.returncode == 0, child.stderr
    assert "clean" in child.stdout


@pytest.fixture
def fw(install_framework, unique) -> str:
    name = unique("log")
    source = component_source(name, "talker").replace(
        'STATE["opens"] += 1',
        "STATE[\"opens\"] += 1\n        ctx.log.info('opening', answer=42)",
    )
    install_framework(name, {"talker": source})
    return name


def test_verbosity_comes_from_the_framework_parameter(fw: str, capsys) -> None:
    with pmca.Session(frameworks=[fw]):
        pass
    assert "opening" not in capsys.readouterr().err  # default verbosity: errors only
    with pmca.Session(mca={f"{fw}_base_verbose": "info"}, frameworks=[fw]):
        pass
    err = capsys.readouterr().err
    assert f"[pmca:{fw}/talker] info: opening answer=42" in err
    assert f"[pmca:{fw}] info: framework opened" in err


def test_stdlib_destination_leaves_handling_to_the_application(fw: str, caplog) -> None:
    caplog.set_level(logging.DEBUG, logger=f"pmca.{fw}")
    mca = {f"{fw}_base_verbose": 100, "mca_base_verbose": "logging"}
    with pmca.Session(mca=mca, frameworks=[fw]):
        pass
    records = [r for r in caplog.records if r.name == f"pmca.{fw}"]
    assert any("opening" in r.getMessage() and "talker" in r.getMessage() for r in records)
    assert not structlog.is_configured()


def test_verbosity_none_silences_errors(install_framework, unique, capsys) -> None:
    name = unique("quiet")
    install_framework(name, {"bad": "import not_there_zz\n"})
    with pmca.Session(mca={f"{name}_base_verbose": "none"}, frameworks=[name]):
        pass
    assert capsys.readouterr().err == ""


def test_verbosity_set_at_run_time_takes_effect(fw: str, capsys) -> None:
    with pmca.Session(frameworks=[fw]) as session:
        log = RUNTIME.frameworks[fw].log
        log.info("before")
        session.set_param(f"{fw}_base_verbose", "info")
        log.info("after")
    err = capsys.readouterr().err
    assert "before" not in err
    assert f"[pmca:{fw}] info: after" in err
