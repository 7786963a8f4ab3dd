"""``Session.param`` of a parameter that exists but is not registered says why."""

from __future__ import annotations

import re

import pytest

import pmca
from pmca.mca.params import UnknownParamError

from ..conftest import component_source


def test_an_excluded_components_parameter(pmca_env) -> None:
    with (
        pmca.Session(mca={"btl": "self"}, frameworks=["btl"]) as s,
        pytest.raises(UnknownParamError) as caught,
    ):
        s.param("btl_tcp_exclusivity")
    message = str(caught.value)
    assert not message.startswith("unknown")
    assert "component btl/tcp is excluded by the selection btl='self' (from command line)" in (
        message
    )
    assert "pmca info --param btl tcp" in message
    assert caught.value.reason is not None


def test_a_component_that_lost_selection(install_framework, unique) -> None:
    """A single framework keeps its best component; the others closed after selection."""
    fw = unique("lost")
    install_framework(
        fw,
        {
            "best": component_source(fw, "best", priority=50),
            "worse": component_source(fw, "worse", priority=5),
        },
    )
    with pmca.Session(frameworks=[fw]) as s:
        assert s.param(f"{fw}_best_priority").value == 50
        with pytest.raises(UnknownParamError, match=rf"component {fw}/worse was not selected"):
            s.param(f"{fw}_worse_priority")


def test_a_framework_that_is_not_open(pmca_env) -> None:
    with (
        pmca.Session(frameworks=["patcher"]) as s,
        pytest.raises(UnknownParamError, match=re.escape("framework 'btl' is not open")),
    ):
        s.param("btl_tcp_exclusivity")


def test_a_misspelt_name_is_still_unknown(pmca_env) -> None:
    with (
        pmca.Session(frameworks=["btl"]) as s,
        pytest.raises(UnknownParamError, match="unknown MCA parameter 'btl_tcp_exclusivty'"),
    ):
        s.param("btl_tcp_exclusivty")
