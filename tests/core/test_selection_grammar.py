"""The selection parameter grammar: include, exclude, errors, aliases."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from pmca import Alias, SelectionError
from pmca.mca._selection import check_included_exist, parse_selection, resolve_aliases

names = st.from_regex(r"[a-z][a-z0-9_]{0,8}", fullmatch=True)


@given(st.lists(names, min_size=1, max_size=6, unique=True), st.booleans())
def test_round_trip(items: list[str], exclude: bool) -> None:
    text = ("^" if exclude else "") + ",".join(items)
    selection = parse_selection(text, parameter="btl")
    assert selection.names == tuple(items)
    assert selection.exclude is exclude
    assert parse_selection(str(selection), parameter="btl") == selection


@given(st.lists(names, min_size=1, max_size=6, unique=True), names, st.booleans())
def test_admits_is_include_xor_exclude(items: list[str], probe: str, exclude: bool) -> None:
    selection = parse_selection(("^" if exclude else "") + ",".join(items), parameter="fw")
    assert selection.admits(probe) == ((probe in items) != exclude)


@given(
    st.lists(names, min_size=2, max_size=5, unique=True),
    st.integers(min_value=1, max_value=4),
)
def test_caret_anywhere_but_the_start_is_an_error(items: list[str], where: int) -> None:
    where = min(where, len(items) - 1)
    items = [*items[:where], "^" + items[where], *items[where + 1 :]]
    with pytest.raises(SelectionError, match=r"'\^' may only appear once, at the start"):
        parse_selection(",".join(items), parameter="btl", source="environment")


def test_error_names_parameter_value_and_source() -> None:
    with pytest.raises(SelectionError) as info:
        parse_selection("self,sm,^tcp", parameter="btl", source="file (/etc/x.conf:3)")
    message = str(info.value)
    assert "'btl'" in message and "self,sm,^tcp" in message and "/etc/x.conf:3" in message


@pytest.mark.parametrize("text", ["", "  "])
def test_empty_means_everything(text: str) -> None:
    selection = parse_selection(text, parameter="btl")
    assert selection.is_everything and selection.admits("anything")


@pytest.mark.parametrize("text", ["a,,b", ",a", "^", "a, ,b"])
def test_empty_items_are_errors(text: str) -> None:
    with pytest.raises(SelectionError, match="empty component name"):
        parse_selection(text, parameter="btl")


def test_aliases_resolve_and_deprecated_ones_are_reported() -> None:
    aliases = {"vader": Alias("sm", deprecated=True), "loop": Alias("self")}
    selection, deprecated = resolve_aliases(
        parse_selection("self,vader,loop,tcp", parameter="btl"), aliases
    )
    assert selection.names == ("self", "sm", "tcp")
    assert deprecated == [("vader", "sm")]


def test_unknown_included_component_names_the_available_ones() -> None:
    selection = parse_selection("self,nope", parameter="btl")
    with pytest.raises(SelectionError) as info:
        check_included_exist(
            selection,
            ["self", "sm", "tcp"],
            {"vader": Alias("sm")},
            framework="btl",
            source="command line",
        )
    message = str(info.value)
    assert "nope" in message and "self, sm, tcp" in message and "vader -> sm" in message


def test_unknown_excluded_names_are_not_errors() -> None:
    check_included_exist(
        parse_selection("^nope", parameter="btl"), ["self"], {}, framework="btl", source="x"
    )
