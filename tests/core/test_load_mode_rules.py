"""Open MPI's --enable-mca-dso / --enable-mca-static rules."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from pmca import SelectionError
from pmca.mca._loader import LoadModeSpec, choose_load_mode


def mode(dso: str, static: str, *, forced: bool = False) -> str:
    return choose_load_mode(
        "btl",
        "tcp",
        dso=LoadModeSpec.parse(dso, parameter="mca_base_component_dso"),
        static=LoadModeSpec.parse(static, parameter="mca_base_component_static"),
        forced_static=forced,
    )


@pytest.mark.parametrize(
    ("dso", "static", "expected"),
    [
        ("none", "none", "static"),  # default: everything static
        ("all", "none", "dso"),
        ("all", "all", "static"),  # same level: static wins
        ("btl", "all", "dso"),  # framework level beats global
        ("all", "btl", "static"),
        ("btl", "btl", "static"),
        ("btl-tcp", "btl", "dso"),  # component level beats framework level
        ("btl", "btl-tcp", "static"),
        ("btl-tcp", "btl-tcp", "static"),
        ("btl-sm", "none", "static"),  # another component
        ("pml,btl-tcp", "none", "dso"),
    ],
)
def test_rules(dso: str, static: str, expected: str) -> None:
    assert mode(dso, static) == expected


def test_forced_static_beats_everything() -> None:
    assert mode("all", "none", forced=True) == "static"
    assert mode("btl-tcp", "none", forced=True) == "static"


@given(st.sampled_from(["none", "all", "btl", "btl-tcp", "btl-sm", "pml"]), st.booleans())
def test_static_never_loses_to_dso_at_the_same_level(value: str, forced: bool) -> None:
    assert mode(value, value, forced=forced) == "static"


@pytest.mark.parametrize("bad", ["btl-", "-tcp", "btl,,tcp", "all,btl"])
def test_malformed_values_are_errors(bad: str) -> None:
    with pytest.raises(SelectionError, match="mca_base_component_dso"):
        LoadModeSpec.parse(bad, parameter="mca_base_component_dso")
