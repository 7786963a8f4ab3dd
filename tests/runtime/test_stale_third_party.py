"""The stale-reference check covers third-party component packages, not just pmca.

Open MPI's #13021 pattern written by a plugin author: a component of one
framework opens another framework, keeps its selected module in a
module-level global, and does not reset it at close.
"""

from __future__ import annotations

import pytest

import pmca
from pmca.runtime import RUNTIME
from tests.conftest import component_source

KEEPER = """
import pmca

#: The plugin's opal_patcher: set at query, never reset.
SELECTED = None

class TestComponent(pmca.Component):
    framework = "{outer}"
    name = "keeper"
    version = "1.0.0"
    api_version = "1.0.0"
    force_static = True   # its module state outlives every session

    @pmca.hookimpl
    def query(self, ctx):
        global SELECTED
        SELECTED = ctx.open_framework("{inner}").module()
        return pmca.Query(priority=1, module=object())

    @pmca.hookimpl
    def close(self, ctx):
        ctx.close_framework("{inner}")
"""


def install_keeper(install_framework, unique) -> tuple[str, str]:
    outer, inner = unique("keep"), unique("kept")
    install_framework(inner, {"worker": component_source(inner, "worker")})
    install_framework(outer, {"keeper": KEEPER.format(outer=outer, inner=inner)})
    return outer, inner


def test_a_third_party_global_left_pointing_at_a_closed_module_is_named(
    install_framework, unique, pmca_load_mode: str
) -> None:
    outer, inner = install_keeper(install_framework, unique)

    session = pmca.Session(frameworks=[outer]).init()
    with pytest.raises(pmca.StaleReferenceError) as raised:
        session.finalize()

    assert f"{outer}_keeper.SELECTED still refers to component {inner}/worker" in str(raised.value)
    assert f"{outer}_keeper" in RUNTIME.scanned_packages
    assert RUNTIME.sessions == 0


def test_warn_reports_and_carries_on(install_framework, unique, capsys) -> None:
    outer, inner = install_keeper(install_framework, unique)

    with pmca.Session(frameworks=[outer], mca={"mca_base_component_stale_check": "warn"}):
        pass

    said = capsys.readouterr().err
    assert f"{outer}_keeper.SELECTED still refers to component {inner}/worker" in said


def test_a_reset_global_is_not_reported(install_framework, unique) -> None:
    outer, _ = install_keeper(install_framework, unique)

    session = pmca.Session(frameworks=[outer]).init()
    import importlib

    importlib.import_module(f"{outer}_keeper").SELECTED = None  # what 860bbd6a11 did
    session.finalize()
    assert RUNTIME.sessions == 0
