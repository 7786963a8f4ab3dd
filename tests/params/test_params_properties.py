"""Property tests of every value parser: round trips and informative rejections."""

from __future__ import annotations

import math
import re
import string
from typing import Any

import pytest
from hypothesis import assume, given
from hypothesis import strategies as st

from pmca.mca.params import (
    AUTO_BOOL,
    VERBOSITY,
    Enumeration,
    Param,
    ParamSpace,
    ParamValueError,
)


def fresh_space(**sources: object) -> ParamSpace:
    return ParamSpace(environ={}, api=dict(sources), param_files=[], override_file="none")


def settable(space: ParamSpace, type_: object, default: object, **kw: Any) -> Param:
    return space.register("prop", "comp", "x", type=type_, default=default, settable=True, **kw)


def round_trips(type_: object, default: object, value: object) -> None:
    """value → value_string → parse (through each textual source) gives value back."""
    space = fresh_space()
    param = settable(space, type_, default)
    space.set(param.full_name, value)
    typed = param.value
    text = param.value_string()
    space.set(param.full_name, text)
    assert param.value == typed
    assert param.value_string() == text
    env_space = ParamSpace(
        environ={"PMCA_MCA_prop_comp_x": text}, param_files=[], override_file="none"
    )
    assert settable(env_space, type_, default).value == typed


def assert_rejected(type_: object, default: object, bad: object, **kw: Any) -> None:
    """Invalid input raises ParamValueError naming param, value, source and valid values."""
    space = fresh_space()
    param = settable(space, type_, default, **kw)
    before = param.value
    with pytest.raises(ParamValueError) as info:
        space.set(param.full_name, bad)
    message = str(info.value)
    assert "'prop_comp_x'" in message
    shown = bad if isinstance(bad, str) else repr(bad)
    assert repr(shown) in message
    assert "from set" in message
    assert f"valid values: {param.valid_values()}" in message
    assert info.value.origin.source.name == "SET"
    assert param.value == before  # a rejected value changes nothing
    # Through the environment the source is the variable itself.
    if isinstance(bad, str):
        with pytest.raises(ParamValueError, match=r"environment \(PMCA_MCA_prop_comp_x\)"):
            settable(
                ParamSpace(
                    environ={"PMCA_MCA_prop_comp_x": bad}, param_files=[], override_file="none"
                ),
                type_,
                default,
                **kw,
            )


# -- integers and sizes --------------------------------------------------------------

INT64 = st.integers(min_value=-(2**63), max_value=2**63 - 1)
UINT64 = st.integers(min_value=0, max_value=2**64 - 1)


@given(INT64)
def test_int_round_trip(value: int) -> None:
    round_trips(int, 0, value)


@given(UINT64)
def test_size_round_trip(value: int) -> None:
    round_trips("size", 0, value)


@given(
    st.integers(min_value=0, max_value=2**40),
    st.sampled_from(["", "k", "K", "m", "M", "g", "G"]),
    st.sampled_from(["dec", "hex", "HEX", "oct"]),
)
def test_size_suffixes_and_bases(number: int, suffix: str, base: str) -> None:
    shift = {"": 0, "k": 10, "m": 20, "g": 30}[suffix.lower()]
    digits = {
        "dec": str(number),
        "hex": hex(number),
        "HEX": "0X" + format(number, "X"),
        "oct": "0" + format(number, "o") if number else "0",
    }[base]
    text = f"  {digits}{suffix} "
    expected = number << shift
    space = fresh_space()
    param = settable(space, "size", 0)
    if expected > 2**64 - 1:
        with pytest.raises(ParamValueError, match="out of range"):
            space.set(param.full_name, text)
    else:
        space.set(param.full_name, text)
        assert param.value == expected
        assert param.value_string() == str(expected)


@given(st.integers(min_value=0, max_value=2**20), st.sampled_from(["k", "m", "g"]))
def test_int_accepts_suffixes_and_signs_like_open_mpi(number: int, suffix: str) -> None:
    shift = {"k": 10, "m": 20, "g": 30}[suffix]
    space = fresh_space()
    param = settable(space, int, 0)
    space.set(param.full_name, f"-{number}{suffix.upper()}")
    assert param.value == -(number << shift)
    space.set(param.full_name, f"+{number}")
    assert param.value == number


def integer_text() -> st.SearchStrategy[str]:
    return st.builds(
        lambda sign, digits, suffix: f"{sign}{digits}{suffix}",
        st.sampled_from(["", "+", "-"]),
        st.integers(min_value=0, max_value=10**6).map(str),
        st.sampled_from(["", "k", "m", "g"]),
    )


@given(integer_text(), st.sampled_from("z.!_ q/,"), st.data())
def test_int_and_size_reject_garbage(valid: str, junk: str, data: st.DataObject) -> None:
    # Inserting one non-integer character strictly inside a valid integer
    # (never at the ends, where whitespace would be stripped) breaks it.
    position = data.draw(st.integers(min_value=1, max_value=max(1, len(valid) - 1)))
    bad = valid[:position] + junk + valid[position:]
    assume(len(valid) >= 2 or junk.strip())
    assert_rejected(int, 0, bad)
    assert_rejected("size", 0, bad)


@pytest.mark.parametrize(
    "bad", ["", "   ", "0x", "08", "1.5", "1e3", "1kb", "k", "--1", "1 k", "0b101", "1_000"]
)
def test_int_specific_rejections(bad: str) -> None:
    assert_rejected(int, 0, bad)


@pytest.mark.parametrize("bad", ["-1", "-0x10", str(2**64), "0x1" + "0" * 16, f"{2**34}g"])
def test_size_rejects_negative_and_overflow(bad: str) -> None:
    assert_rejected("size", 0, bad)


@pytest.mark.parametrize("bad", [str(2**63), f"-{2**63 + 1}", f"{2**33}g"])
def test_int_rejects_overflow(bad: str) -> None:
    assert_rejected(int, 0, bad)


def test_leading_zero_is_octal_like_strtoull() -> None:
    space = fresh_space()
    param = settable(space, int, 0)
    space.set(param.full_name, "010")
    assert param.value == 8
    space.set(param.full_name, "0x1f")
    assert param.value == 31


@pytest.mark.parametrize("bad", [True, 1.5, None, [1]])
def test_int_rejects_non_integer_python_values(bad: object) -> None:
    assert_rejected(int, 0, bad)


# -- floats --------------------------------------------------------------------------


@given(st.floats(allow_nan=False))
def test_float_round_trip(value: float) -> None:
    round_trips(float, 0.0, value)


@given(st.text(alphabet="0123456789.eE+-_ xyzn", min_size=1))
def test_float_parses_exactly_like_python_without_underscores_or_nan(text: str) -> None:
    try:
        expected = float(text) if "_" not in text else None
    except ValueError:
        expected = None
    if expected is None or math.isnan(expected):
        assert_rejected(float, 0.0, text)
    else:
        space = fresh_space()
        param = settable(space, float, 0.0)
        space.set(param.full_name, text)
        assert param.value == expected


def test_float_rejects_nan() -> None:
    assert_rejected(float, 0.0, "nan")
    assert_rejected(float, 0.0, float("nan"))


# -- bools ----------------------------------------------------------------------------

TRUE = ["1", "t", "true", "enabled", "yes", "y"]
FALSE = ["0", "f", "false", "disabled", "no", "n"]


def random_case(word: str, flips: list[bool]) -> str:
    return "".join(
        c.upper() if flip else c for c, flip in zip(word, flips + [False] * len(word), strict=False)
    )


@given(
    st.sampled_from(TRUE + FALSE),
    st.lists(st.booleans(), max_size=10),
    st.sampled_from(["", " ", "\t"]),
)
def test_bool_spellings_any_case(word: str, flips: list[bool], pad: str) -> None:
    space = fresh_space()
    param = settable(space, bool, False)
    space.set(param.full_name, pad + random_case(word, flips) + pad)
    assert param.value is (word in TRUE)
    assert param.value_string() == ("true" if word in TRUE else "false")


@given(st.booleans())
def test_bool_round_trip(value: bool) -> None:
    round_trips(bool, False, value)


@given(st.text(max_size=8))
def test_bool_rejects_everything_else(text: str) -> None:
    stripped = text.strip()
    assume(stripped.lower() not in TRUE + FALSE)
    # Like Open MPI's strtol-based parser, any spelling of the numbers 0 and 1 is fine.
    assume(not (re.fullmatch(r"[+-]?[0-9]+", stripped) and int(stripped) in (0, 1)))
    assert_rejected(bool, False, text)


def test_bool_rejects_other_numbers_and_types() -> None:
    for bad in ("2", "-1", "on", "off", 2, 0.0, None):
        assert_rejected(bool, False, bad)


# -- enumerations -----------------------------------------------------------------------


@given(
    st.sampled_from([name for name, _ in VERBOSITY.values]), st.lists(st.booleans(), max_size=10)
)
def test_verbosity_names_any_case(name: str, flips: list[bool]) -> None:
    space = fresh_space()
    param = settable(space, VERBOSITY, 0)
    space.set(param.full_name, random_case(name, flips))
    assert param.value == dict(VERBOSITY.values)[name]
    assert param.value_string() == name


@given(st.integers(min_value=-(10**12), max_value=10**12))
def test_verbosity_numbers_clamped(number: int) -> None:
    space = fresh_space()
    param = settable(space, VERBOSITY, 0)
    space.set(param.full_name, str(number))
    assert param.value == min(max(number, -1), 100)
    space.set(param.full_name, number)
    assert param.value == min(max(number, -1), 100)


@given(st.integers(min_value=-1, max_value=100))
def test_verbosity_round_trip(value: int) -> None:
    round_trips(VERBOSITY, 0, value)


@given(st.text(alphabet=string.ascii_letters + "!-. ", min_size=1, max_size=10))
def test_verbosity_rejects_unknown_names(text: str) -> None:
    known = {name for name, _ in VERBOSITY.values}
    assume(text.strip().lower() not in known and not re.fullmatch(r"\s*[+-]?\d+\s*", text))
    assert_rejected(VERBOSITY, 0, text)


@given(st.sampled_from(["auto", "true", "false", *TRUE, *FALSE, "-1"]), st.lists(st.booleans()))
def test_auto_bool(word: str, flips: list[bool]) -> None:
    expected = -1 if word in ("auto", "-1") else (1 if word in TRUE else 0)
    space = fresh_space()
    param = settable(space, AUTO_BOOL, -1)
    space.set(param.full_name, random_case(word, flips))
    assert param.value == expected
    assert param.value_string() == {-1: "auto", 0: "false", 1: "true"}[expected]


@given(st.sampled_from([-1, 0, 1]))
def test_auto_bool_round_trip(value: int) -> None:
    round_trips(AUTO_BOOL, -1, value)


def test_auto_bool_accepts_python_bools_and_rejects_other_numbers() -> None:
    space = fresh_space(prop_comp_x=True)
    assert settable(space, AUTO_BOOL, -1).value == 1
    for bad in ("2", "-2", "maybe", 5):
        assert_rejected(AUTO_BOOL, -1, bad)


enum_names = st.text(alphabet=string.ascii_lowercase + "_", min_size=1, max_size=6)


@st.composite
def enumerations(draw: st.DrawFn) -> Enumeration:
    names = draw(st.lists(enum_names, min_size=1, max_size=6, unique=True))
    values = draw(
        st.lists(
            st.integers(min_value=-1000, max_value=1000),
            min_size=len(names),
            max_size=len(names),
            unique=True,
        )
    )
    return Enumeration.create("custom", dict(zip(names, values, strict=True)))


@given(enumerations(), st.data())
def test_custom_enumeration_round_trip(enumeration: Enumeration, data: st.DataObject) -> None:
    name, value = data.draw(st.sampled_from(enumeration.values))
    round_trips(enumeration, enumeration.values[0][1], value)
    space = fresh_space()
    param = settable(space, int, enumeration.values[0][1], enumeration=enumeration)
    space.set(param.full_name, name.upper())
    assert param.value == value
    space.set(param.full_name, str(value))  # the number is accepted too
    assert param.value == value


@given(enumerations(), st.integers(min_value=-2000, max_value=2000))
def test_custom_enumeration_rejects_other_numbers(enumeration: Enumeration, number: int) -> None:
    assume(number not in {v for _, v in enumeration.values})
    assert_rejected(enumeration, enumeration.values[0][1], str(number))
    assert_rejected(enumeration, enumeration.values[0][1], number)


# -- strings and lists ----------------------------------------------------------------------


@given(st.text())
def test_string_round_trip(value: str) -> None:
    space = fresh_space()
    param = settable(space, str, "")
    space.set(param.full_name, value)
    assert param.value == value
    space.set(param.full_name, param.value_string())
    assert param.value == value


item = (
    st.text(
        alphabet=st.characters(blacklist_characters=",", blacklist_categories=["Cs"]), min_size=1
    )
    .map(str.strip)
    .filter(bool)
)


@given(st.lists(item, max_size=6))
def test_list_round_trip(items: list[str]) -> None:
    round_trips(list, "", tuple(items))
    round_trips(list, "", list(items))


@given(st.lists(item, max_size=6), st.lists(st.sampled_from(["", " ", "\t", "  "]), min_size=14))
def test_list_parsing_strips_items_and_drops_empty_ones(items: list[str], pads: list[str]) -> None:
    text = ",".join(f"{pads[i]}{it}{pads[i + 1]}" for i, it in enumerate(items)) + ", ,"
    space = fresh_space()
    param = settable(space, list, "")
    space.set(param.full_name, text)
    assert param.value == tuple(items)


def test_list_rejects_bad_items() -> None:
    for bad in (["a,b"], [""], [1], 5):
        assert_rejected(list, "", bad)
