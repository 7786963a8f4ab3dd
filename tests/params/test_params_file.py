"""The parameter-file grammar, on real files."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

from pmca.mca.params import (
    Entry,
    ParamError,
    ParamFileError,
    ParamSpace,
    ParamWarning,
    parse_param_file,
)


def conf(tmp_path: Path, text: str, name: str = "p.conf") -> Path:
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    return path


def test_key_value_comments_blank_lines_and_empty_values(tmp_path: Path) -> None:
    path = conf(
        tmp_path,
        "# full-line comment\n"
        "\n"
        "   \t\n"
        "btl = self,sm\n"
        "   # indented comment\n"
        "// Open MPI's other comment style\n"
        "  btl_tcp_if_include   =   eth0 , eth1  \n"
        "empty_value =\n"
        "empty_spaces =    \n"
        "hash_inside = a#b # c\n"
        'quoted = "x y"\n'
        "eq_in_value = a=b=c\n",
    )
    p = str(path)
    assert parse_param_file(path) == [
        Entry("btl", "self,sm", p, 4),
        Entry("btl_tcp_if_include", "eth0 , eth1", p, 7),
        Entry("empty_value", "", p, 8),
        Entry("empty_spaces", "", p, 9),
        # A trailing comment starts at a '#' after a blank; 'a#b' is one word.
        Entry("hash_inside", "a#b", p, 10),
        # No quoting: quotes are part of the value.
        Entry("quoted", '"x y"', p, 11),
        # The value is everything after the first '='.
        Entry("eq_in_value", "a=b=c", p, 12),
    ]


def test_keys_are_literal_no_prefix_stripped(tmp_path: Path) -> None:
    path = conf(tmp_path, "PMCA_MCA_btl = tcp\nmca_btl = sm\n_x = 1\n")
    assert [e.key for e in parse_param_file(path)] == ["PMCA_MCA_btl", "mca_btl", "_x"]


def test_crlf_bom_and_missing_final_newline(tmp_path: Path) -> None:
    path = tmp_path / "dos.conf"
    path.write_bytes(b"\xef\xbb\xbf# bom\r\na = 1\r\nb = 2")
    assert [(e.key, e.value, e.lineno) for e in parse_param_file(path)] == [
        ("a", "1", 2),
        ("b", "2", 3),
    ]


def test_line_numbers_follow_newlines_only(tmp_path: Path) -> None:
    # A form feed is whitespace inside a line, not a line break.
    path = conf(tmp_path, "a = 1\f\nb = 2\n")
    assert [(e.key, e.lineno) for e in parse_param_file(path)] == [("a", 1), ("b", 2)]


@pytest.mark.parametrize(
    ("line", "problem"),
    [
        ("just some words", "expected 'key = value'"),
        ("btl self,sm", "expected 'key = value'"),
        ("= value", "missing key"),
        ("1btl = x", "invalid key '1btl'"),
        ("btl-tcp = x", "invalid key 'btl-tcp'"),
        ("btl tcp = x", "invalid key 'btl tcp'"),
        ("/* block */", "expected 'key = value'"),
        ("btl.tcp = x", "invalid key 'btl.tcp'"),
    ],
)
def test_malformed_line_names_path_line_and_text(tmp_path: Path, line: str, problem: str) -> None:
    path = conf(tmp_path, f"# ok\nbtl = self\n{line}\n")
    with pytest.raises(ParamFileError) as info:
        parse_param_file(path)
    error = info.value
    assert str(error).startswith(f"{path}:3: ")
    assert problem in str(error)
    assert line.strip() in str(error)
    assert (error.path, error.lineno) == (str(path), 3)
    assert isinstance(error, ParamError)
    assert isinstance(error, ValueError)


def test_malformed_file_fails_space_construction(tmp_path: Path) -> None:
    bad = conf(tmp_path, "btl = self\noops\n")
    with pytest.raises(ParamFileError, match=rf"^{bad}:2: .*'oops'"):
        ParamSpace(environ={}, param_files=[bad], override_file="none")


@pytest.mark.parametrize(
    ("given", "origin"),
    [
        ("env", "environment (PMCA_MCA_mca_base_param_files)"),
        ("api", "command line"),
        ("default", "default"),
    ],
)
def test_malformed_line_says_which_parameter_named_its_file(
    tmp_path: Path, given: str, origin: str
) -> None:
    """Path and line, and that ``mca_base_param_files`` named the file, from where."""
    bad = conf(tmp_path, "btl = self\noops\n")
    if given == "env":
        options = {"environ": {"PMCA_MCA_mca_base_param_files": str(bad)}}
    elif given == "api":
        options = {"environ": {}, "api": {"mca_base_param_files": str(bad)}}
    else:  # the default names ~/.pmca/mca-params.conf first
        home = tmp_path / "home"
        (home / ".pmca").mkdir(parents=True)
        bad = conf(home / ".pmca", "btl = self\noops\n", "mca-params.conf")
        options = {"environ": {"HOME": str(home)}}
    with pytest.raises(ParamFileError) as info:
        ParamSpace(override_file="none", **options)
    message = str(info.value)
    assert message.startswith(f"{bad}:2: "), message
    assert message.endswith(f"(named by mca_base_param_files from {origin})"), message


def test_malformed_override_file_fails_too(tmp_path: Path) -> None:
    bad = conf(tmp_path, "\n\n9x = 1\n", "override.conf")
    with pytest.raises(ParamFileError, match=rf"^{bad}:3: invalid key '9x'"):
        ParamSpace(environ={}, param_files=[], override_file=bad)


def test_missing_file_raises_when_parsed_directly(tmp_path: Path) -> None:
    with pytest.raises(ParamFileError, match="not found"):
        parse_param_file(tmp_path / "nope.conf")


def test_not_utf8_and_directory_are_errors(tmp_path: Path) -> None:
    blob = tmp_path / "blob.conf"
    blob.write_bytes(b"a = \xff\xfe\n")
    with pytest.raises(ParamFileError, match="UTF-8"):
        parse_param_file(blob)
    with pytest.raises(ParamFileError, match="cannot read"):
        parse_param_file(tmp_path)


def test_explicit_missing_file_is_an_error_naming_it(tmp_path: Path) -> None:
    missing = tmp_path / "missing.conf"
    with pytest.raises(ParamFileError) as info:
        ParamSpace(environ={"PMCA_MCA_mca_base_param_files": str(missing)}, override_file="none")
    message = str(info.value)
    assert message.startswith(f"{missing}: ")
    assert "mca_base_param_files" in message
    assert "environment (PMCA_MCA_mca_base_param_files)" in message
    with pytest.raises(ParamFileError, match=r"missing\.conf"):
        ParamSpace(environ={}, api={"mca_base_param_files": str(missing)}, override_file="none")
    with pytest.raises(ParamFileError, match=r"missing\.conf"):
        ParamSpace(environ={}, param_files=[missing], override_file="none")
    with pytest.raises(ParamFileError, match="mca_base_override_param_file"):
        ParamSpace(environ={}, param_files=[], override_file=missing)


def test_default_files_missing_are_skipped(tmp_path: Path) -> None:
    space = ParamSpace(environ={"HOME": str(tmp_path / "nohome")}, override_file="none")
    assert space.param_files == ()
    param = space.get("mca_base_param_files")
    assert str(param.origin) == "default"
    assert param.value == (
        f"~/.pmca/mca-params.conf,{os.path.join(sys.prefix, 'etc', 'pmca-mca-params.conf')}"
    )
    override = space.get("mca_base_override_param_file")
    assert override.value == "none"


def test_default_user_file_is_read_with_home_expanded(tmp_path: Path) -> None:
    user = tmp_path / "home" / ".pmca" / "mca-params.conf"
    user.parent.mkdir(parents=True)
    user.write_text("test_comp_knob = 42\n", encoding="utf-8")
    space = ParamSpace(environ={"HOME": str(tmp_path / "home")}, override_file="none")
    assert space.param_files[0] == str(user)
    knob = space.register("test", "comp", "knob", type=int, default=0)
    assert knob.value == 42
    assert str(knob.origin) == f"file ({user}:1)"


def test_tilde_in_explicit_list_uses_environ_home(tmp_path: Path) -> None:
    conf(tmp_path, "test_comp_knob = 7\n", "mine.conf")
    space = ParamSpace(
        environ={"HOME": str(tmp_path), "PMCA_MCA_mca_base_param_files": "~/mine.conf"},
        override_file="none",
    )
    assert space.register("test", "comp", "knob", type=int, default=0).value == 7


@pytest.mark.parametrize("off", ["none", "NONE", " none ", ""])
def test_none_disables_param_files(tmp_path: Path, off: str) -> None:
    user = tmp_path / ".pmca" / "mca-params.conf"
    user.parent.mkdir()
    user.write_text("test_comp_knob = 1\n", encoding="utf-8")
    space = ParamSpace(
        environ={"HOME": str(tmp_path), "PMCA_MCA_mca_base_param_files": off},
        override_file="none",
    )
    assert space.param_files == ()
    assert space.register("test", "comp", "knob", type=int, default=0).value == 0


def test_override_file_from_environment(tmp_path: Path) -> None:
    over = conf(tmp_path, "test_comp_knob = 5\n", "o.conf")
    space = ParamSpace(environ={"PMCA_MCA_mca_base_override_param_file": str(over)}, param_files=[])
    assert space.override_file == str(over)
    knob = space.register("test", "comp", "knob", type=int, default=0, settable=True)
    assert str(knob.origin) == f"override ({over}:1)"


def test_core_params_in_files_are_ignored_with_a_warning(tmp_path: Path) -> None:
    other = conf(tmp_path, "test_comp_knob = 3\n", "other.conf")
    main = conf(tmp_path, f"mca_base_param_files = {other}\nmca_param_files = {other}\n")
    with pytest.warns(ParamWarning) as record:
        space = ParamSpace(environ={}, param_files=[main], override_file="none")
    messages = [str(w.message) for w in record]
    assert any("'mca_base_param_files' can only be set" in m and f"{main}:1" in m for m in messages)
    assert any("'mca_param_files'" in m and f"{main}:2" in m for m in messages)
    assert space.param_files == (str(main),)
    assert space.register("test", "comp", "knob", type=int, default=0).value == 0


def test_default_override_file_missing_is_skipped(tmp_path: Path) -> None:
    space = ParamSpace(environ={"HOME": str(tmp_path)}, param_files=[])
    param = space.get("mca_base_override_param_file")
    assert str(param.origin) == "default"
    assert param.value == os.path.join(sys.prefix, "etc", "pmca-mca-params-override.conf")
    if not os.path.exists(param.value):
        assert space.override_file is None
