"""Every bad input, every source: the same error or warning from a session and from ``pmca info``.

Each row is one input (parameter, value) and the exact text it must produce;
each row runs for every source a value can come from (environment variable,
API / ``--mca``, parameter file), and both through :class:`pmca.Session` and
through ``pmca info``, so neither front end can accept what the other refuses.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable
from pathlib import Path

import attrs
import pytest

import pmca
from pmca.mca.params import ParamValueError

SOURCES = ("environment", "command line", "file")
LOAD_LIST_VALID = (
    "valid values: 'all', 'none', or a comma-separated list of framework names ('memory') "
    "and framework-component pairs ('memory-patcher')"
)


NOT_A_BOOLEAN = "(this is not a boolean: use 'all' or 'none')"


@attrs.frozen
class Row:
    name: str
    value: str
    #: What follows "invalid value ... from <source>: " (an error), or the
    #: warning text after "(from <source>): " (a warning).
    expected: str
    warning: bool = False


ERRORS = [
    Row(
        "mca_base_component_dso",
        "ALL",
        "invalid item 'ALL': 'ALL' is not a keyword; did you mean 'all'?",
    ),
    Row(
        "mca_base_component_dso",
        "All",
        "invalid item 'All': 'All' is not a keyword; did you mean 'all'?",
    ),
    Row(
        "mca_base_component_dso",
        "yes",
        f"invalid item 'yes': 'yes' is not a framework name {NOT_A_BOOLEAN}",
    ),
    Row(
        "mca_base_component_dso",
        "1",
        f"invalid item '1': '1' is not a framework name {NOT_A_BOOLEAN}",
    ),
    Row(
        "mca_base_component_dso",
        "true",
        f"invalid item 'true': 'true' is not a framework name {NOT_A_BOOLEAN}",
    ),
    Row(
        "mca_base_component_dso",
        "memory/patcher",
        "invalid item 'memory/patcher': 'memory/patcher' uses '/'; "
        "a component is named 'memory-patcher'",
    ),
    Row(
        "mca_base_component_dso",
        "memory_patcher",
        "invalid item 'memory_patcher': 'memory_patcher' is not a framework name; "
        "did you mean 'memory-patcher'?",
    ),
    Row("mca_base_component_dso", "dso", "no installed framework is called 'dso'"),
    Row(
        "mca_base_component_static",
        "memroy",
        "no installed framework is called 'memroy'; did you mean 'memory'?",
    ),
    Row(
        "mca_base_component_dso",
        "memory-nosuch",
        "framework 'memory' has no component 'nosuch'",
    ),
    Row(
        "mca_base_component_show_load_errors",
        "bogus",
        "no installed framework is called 'bogus'",
    ),
    Row(
        "mca_base_component_show_load_errors",
        "memory-patcher",
        "'memory-patcher' is not a framework or framework/component name; "
        "did you mean 'memory/patcher'?",
    ),
    Row(
        "mca_base_component_show_load_errors",
        "memory/nosuch",
        "framework 'memory' has no component 'nosuch'",
    ),
    Row(
        "mca_base_component_show_load_errors",
        "^memroy",
        "no installed framework is called 'memroy'; did you mean 'memory'?",
    ),
    Row(
        "mca_base_verbose",
        "file:/tmp/out",
        "'file:/tmp/out': Open MPI's 'file' is not supported by pmca",
    ),
    Row("mca_base_verbose", "stdrr", "'stdrr' is not a destination"),
    Row("memory_base_verbose", "loud", "not one of the names of enumeration 'verbosity'"),
    Row("mpi_leave_pinned", "maybe", "not one of the names of enumeration 'auto_bool'"),
    Row("memory_patcher_disable", "2", "not a boolean"),
    Row("memory_patcher_priority", "abc", "not an integer"),
    Row("memory_patcher_priority", "5 5", "not an integer"),
]

WARNINGS = [
    Row(
        "memory_patcher_priorty",
        "3",
        "component memory/patcher has no such parameter, the value is ignored; "
        "did you mean 'memory_patcher_priority'",
        warning=True,
    ),
    Row(
        "memory_pacher_priority",
        "3",
        "framework 'memory' has no component of that name",
        warning=True,
    ),
    Row(
        "mca_base_verbos",
        "3",
        "no such pmca parameter, the value is ignored; did you mean 'mca_base_verbose'",
        warning=True,
    ),
]

Given = Callable[[Row, str], "tuple[dict[str, str], list[str], str]"]


@pytest.fixture
def given(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Given:
    """Put a row's value where ``source`` says; return (Session mca, info args, origin text)."""

    def give(row: Row, source: str) -> tuple[dict[str, str], list[str], str]:
        if source == "environment":
            variable = f"PMCA_MCA_{row.name}"
            monkeypatch.setenv(variable, row.value)
            return {}, [], f"environment ({variable})"
        if source == "command line":
            return {row.name: row.value}, ["--mca", row.name, row.value], "command line"
        # A file is the lowest source: the suite's own load-mode variable must not hide it.
        monkeypatch.delenv(f"PMCA_MCA_{row.name}", raising=False)
        path = tmp_path / "params.conf"
        path.write_text(f"# a comment\n{row.name} = {row.value}   # trailing comment\n")
        monkeypatch.setenv("PMCA_MCA_mca_base_param_files", str(path))
        return {}, [], f"file ({path}:2)"

    return give


def _error(row: Row, origin: str) -> str:
    return (
        f"invalid value {row.value!r} for MCA parameter {row.name!r} from {origin}: {row.expected}"
    )


def _row_id(row: Row) -> str:
    return f"{row.name}={row.value}"


@pytest.mark.parametrize("source", SOURCES)
@pytest.mark.parametrize("row", ERRORS, ids=_row_id)
def test_a_bad_value_is_an_error_in_a_session(row: Row, source: str, given: Given) -> None:
    mca, _, origin = given(row, source)
    session = pmca.Session(mca=mca)
    with pytest.raises(ParamValueError) as raised:
        session.init()
        session.finalize()  # only reached when the value was wrongly accepted
    assert str(raised.value).startswith(_error(row, origin))
    assert "valid values: " in str(raised.value)
    if row.name.startswith("mca_base_component_") and "show" not in row.name:
        assert str(raised.value).endswith(LOAD_LIST_VALID)


@pytest.mark.parametrize("source", SOURCES)
@pytest.mark.parametrize("row", ERRORS, ids=_row_id)
def test_a_bad_value_is_an_error_in_pmca_info(row: Row, source: str, given: Given, cli) -> None:
    _, args, origin = given(row, source)
    result = cli("info", *args)
    assert result.code == 2
    assert f"pmca info: error: {_error(row, origin)}" in result.err
    assert result.out == ""


@pytest.mark.parametrize("source", SOURCES)
@pytest.mark.parametrize("row", WARNINGS, ids=_row_id)
def test_an_unknown_name_warns_once_in_a_session(row: Row, source: str, given: Given) -> None:
    mca, _, origin = given(row, source)
    expected = f"unknown MCA parameter {row.name!r} (from {origin}): {row.expected}"
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        with pmca.Session(mca=mca):
            pass
        with pmca.Session(mca=mca), pmca.Session(mca=mca):
            pass
    texts = [str(w.message) for w in caught if issubclass(w.category, pmca.ParamWarning)]
    # Once per parameter-space lifetime (a session epoch), not once per session.
    assert len([t for t in texts if t.startswith(expected)]) == 2, texts


@pytest.mark.parametrize("source", SOURCES)
@pytest.mark.parametrize("row", WARNINGS, ids=_row_id)
def test_an_unknown_name_warns_in_pmca_info(row: Row, source: str, given: Given, cli) -> None:
    _, args, origin = given(row, source)
    result = cli("info", *args)
    assert result.code == 0
    expected = f"pmca info: warning: unknown MCA parameter {row.name!r} (from {origin}): "
    assert expected + row.expected in result.err


def test_a_trailing_comment_is_not_part_of_the_value(given: Given) -> None:
    row = Row("memory_patcher_priority", "55", "")
    _, _, origin = given(row, "file")
    with pmca.Session(frameworks=["memory"]) as session:
        param = session.param("memory_patcher_priority")
        assert (param.value, str(param.origin)) == (55, origin)
        # The component was not dropped: its value is in use.
        assert [c.priority for c in session.components("memory")] == [55]


SELECTION_ERRORS = [
    Row(
        "memory",
        "nosuch",
        "framework 'memory': requested component(s) nosuch not found (selection 'nosuch' "
        "from {origin}); available: ",
    ),
    Row(
        "memory",
        "patcher,^none",
        "parameter 'memory' = 'patcher,^none' (from {origin}): '^' may only appear once, "
        "at the start of the list",
    ),
]


@pytest.mark.parametrize("source", SOURCES)
@pytest.mark.parametrize("row", SELECTION_ERRORS, ids=_row_id)
def test_a_bad_selection_is_an_error_in_both(row: Row, source: str, given: Given, cli) -> None:
    mca, args, origin = given(row, source)
    expected = row.expected.format(origin=origin)
    session = pmca.Session(mca=mca, frameworks=["memory"])
    with pytest.raises(pmca.SelectionError) as raised:
        session.init()
        session.finalize()  # only reached when the value was wrongly accepted
    assert str(raised.value).startswith(expected)
    result = cli("info", *args)
    assert result.code == 2
    assert f"pmca info: error: {expected}" in result.err


@pytest.mark.parametrize("source", SOURCES)
def test_excluding_a_component_that_does_not_exist_warns(source: str, given: Given, cli) -> None:
    row = Row("memory", "^nosuch", "")
    mca, args, origin = given(row, source)
    expected = (
        f"framework 'memory': excluded component(s) nosuch do not exist "
        f"(selection '^nosuch' from {origin}); available: "
    )
    with pytest.warns(pmca.ParamWarning) as caught, pmca.Session(mca=mca, frameworks=["memory"]):
        pass
    assert any(str(w.message).startswith(expected) for w in caught)
    result = cli("info", *args)
    assert result.code == 0 and f"pmca info: warning: {expected}" in result.err


@pytest.mark.parametrize(
    ("kwargs", "error", "text"),
    [
        (
            {"frameworks": "memory"},
            TypeError,
            "Session(frameworks=...) takes a list of framework names, not a string; "
            "did you mean frameworks=['memory']?",
        ),
        (
            {"mca": {1: 2}},
            pmca.ParamError,
            "Session(mca=...): 1 is not an MCA parameter name",
        ),
        (
            {"mca": [("memory", "patcher")]},
            TypeError,
            "Session(mca=...) takes a mapping of parameter names to values, not list",
        ),
        (
            {"frameworks": [None]},
            TypeError,
            "Session(frameworks=...): None is not a framework name",
        ),
    ],
)
def test_session_arguments_are_checked_when_given(kwargs, error, text, pmca_env) -> None:
    with pytest.raises(error) as raised:
        pmca.Session(**kwargs)
    assert str(raised.value).startswith(text)


@pytest.mark.parametrize("source", SOURCES)
def test_a_drop_in_directory_that_does_not_exist_warns(
    source: str, given: Given, cli, tmp_path: Path
) -> None:
    missing = str(tmp_path / "no-such-dir")
    row = Row("mca_base_component_path", missing, "")
    mca, args, origin = given(row, source)
    expected = (
        f"MCA parameter 'mca_base_component_path' (from {origin}) names {missing!r}, "
        f"which is not a directory; no drop-in components are found there"
    )
    with pytest.warns(pmca.ParamWarning) as caught, pmca.Session(mca=mca, frameworks=[]):
        pass
    assert [str(w.message) for w in caught] == [expected]
    result = cli("info", *args)
    assert result.code == 0 and f"pmca info: warning: {expected}" in result.err


def test_syslog_is_a_destination(pmca_env) -> None:
    mca = {"mca_base_verbose": "syslog,syslogpri:debug,syslogid:pmcatest"}
    with pmca.Session(mca=mca, frameworks=["memory"]) as session:
        assert session.param("mca_base_verbose").value == mca["mca_base_verbose"]


def test_a_parameter_of_a_component_that_was_not_selected_is_not_unknown(pmca_env) -> None:
    """memory/none wins here: patcher registered its parameters, then closed."""
    mca = {"memory_patcher_priority": "-5", "memory_none_priority_typo": "1"}
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        with pmca.Session(mca=mca, frameworks=["memory"]) as session:
            assert [c.name for c in session.components("memory")] != ["patcher"]
    texts = [str(w.message) for w in caught if issubclass(w.category, pmca.ParamWarning)]
    assert not [t for t in texts if "'memory_patcher_priority'" in t.split(":")[0]], texts
    assert any(t.startswith("unknown MCA parameter 'memory_none_priority_typo'") for t in texts)
