"""The READABLE and PARSABLE dump formats, checked against Open MPI 5.0.11's shapes."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from pmca.mca.params import (
    AUTO_BOOL,
    VERBOSITY,
    ParamSpace,
    format_parsable,
    format_readable,
)


def space(**kw: Any) -> ParamSpace:
    kw.setdefault("environ", {})
    kw.setdefault("param_files", [])
    kw.setdefault("override_file", "none")
    return ParamSpace(**kw)


def test_parsable_verbose_matches_open_mpi_layout() -> None:
    s = space()
    param = s.register(
        "btl",
        "base",
        "verbose",
        type=VERBOSITY,
        default=0,
        help="Verbosity level for the btl framework (default: 0)",
        level=8,
        settable=True,
    )
    # Open MPI 5.0.11, ompi_info --parsable, btl_base_verbose (same lines, same order).
    assert format_parsable(param) == [
        "mca:btl:base:param:btl_base_verbose:value:error",
        "mca:btl:base:param:btl_base_verbose:source:default",
        "mca:btl:base:param:btl_base_verbose:status:writeable",
        "mca:btl:base:param:btl_base_verbose:level:8",
        "mca:btl:base:param:btl_base_verbose:help:Verbosity level for the btl framework "
        "(default: 0)",
        "mca:btl:base:param:btl_base_verbose:enumerator:value:-1:none",
        "mca:btl:base:param:btl_base_verbose:enumerator:value:0:error",
        "mca:btl:base:param:btl_base_verbose:enumerator:value:10:component",
        "mca:btl:base:param:btl_base_verbose:enumerator:value:20:warn",
        "mca:btl:base:param:btl_base_verbose:enumerator:value:40:info",
        "mca:btl:base:param:btl_base_verbose:enumerator:value:60:trace",
        "mca:btl:base:param:btl_base_verbose:enumerator:value:80:debug",
        "mca:btl:base:param:btl_base_verbose:enumerator:value:100:max",
        "mca:btl:base:param:btl_base_verbose:deprecated:no",
        "mca:btl:base:param:btl_base_verbose:type:int",
        "mca:btl:base:param:btl_base_verbose:disabled:false",
    ]


def test_parsable_selection_param_lists_under_base() -> None:
    s = space(api={"btl": "self,sm"})
    param = s.register("btl", None, None, type=str, default="", help="Selection", level=2)
    lines = format_parsable(param)
    assert lines[0] == "mca:btl:base:param:btl:value:self,sm"
    assert lines[1] == "mca:btl:base:param:btl:source:command line"
    assert lines[2] == "mca:btl:base:param:btl:status:read-only"
    assert "mca:btl:base:param:btl:type:string" in lines


def test_parsable_synonyms_both_ways() -> None:
    s = space()
    real = s.get("mca_base_param_files")
    lines = format_parsable(real)
    assert "mca:mca:base:param:mca_base_param_files:deprecated:no" in lines
    assert lines[-2] == "mca:mca:base:param:mca_base_param_files:synonym:name:mca_param_files"
    syn = format_parsable(real, name="mca_param_files")
    assert syn[0].startswith("mca:mca:base:param:mca_param_files:value:")
    assert "mca:mca:base:param:mca_param_files:deprecated:yes" in syn
    assert "mca:mca:base:param:mca_param_files:status:read-only" in syn
    assert syn[-2] == "mca:mca:base:param:mca_param_files:synonym_of:name:mca_base_param_files"
    assert syn[-1] == "mca:mca:base:param:mca_param_files:disabled:false"
    with pytest.raises(ValueError, match="not a name"):
        format_parsable(real, name="nope")


def test_parsable_synonym_from_another_framework() -> None:
    s = space()
    param = s.register(
        "mpi",
        None,
        "leave_pinned",
        type=AUTO_BOOL,
        default=-1,
        help="Keep registrations",
        level=9,
        deprecated_synonyms=["opal_leave_pinned"],
    )
    # The shape of Open MPI 5.0.11's entry for opal_leave_pinned.
    prefix = "mca:opal:base:param:opal_leave_pinned:"
    assert format_parsable(param, name="opal_leave_pinned") == [
        prefix + "value:auto",
        prefix + "source:default",
        prefix + "status:read-only",
        prefix + "level:9",
        prefix + "help:Keep registrations",
        prefix + "enumerator:value:0:false",
        prefix + "enumerator:value:1:true",
        prefix + "enumerator:value:-1:auto",
        prefix + "deprecated:yes",
        prefix + "type:int",
        prefix + "synonym_of:name:mpi_leave_pinned",
        prefix + "disabled:false",
    ]
    assert format_parsable(param)[0] == "mca:mpi:base:param:mpi_leave_pinned:value:auto"


def test_parsable_quotes_values_with_colons_and_bool_enumerators() -> None:
    s = space(api={"mca_base_component_path": "/a/b:~/c", "t_c_flag": "yes"})
    path = s.register("mca", "base", "component_path", type=str, default="")
    flag = s.register("t", "c", "flag", type=bool, default=False)
    assert format_parsable(path)[0] == 'mca:mca:base:param:mca_base_component_path:value:"/a/b:~/c"'
    lines = format_parsable(flag)
    assert lines[0] == "mca:t:c:param:t_c_flag:value:true"
    assert "mca:t:c:param:t_c_flag:enumerator:value:0:false" in lines
    assert "mca:t:c:param:t_c_flag:enumerator:value:1:true" in lines
    assert "mca:t:c:param:t_c_flag:type:bool" in lines
    # No help line when there is no help, as in Open MPI.
    assert not any(":help:" in line for line in lines)


def test_parsable_types_and_file_source(tmp_path: Path) -> None:
    conf = tmp_path / "p.conf"
    conf.write_text("t_c_size = 4k\nt_c_ratio = 0.5\nt_c_items = a, b\n", encoding="utf-8")
    s = space(param_files=[conf])
    size = s.register("t", "c", "size", type="size", default=0)
    ratio = s.register("t", "c", "ratio", type=float, default=1.0)
    items = s.register("t", "c", "items", type=list, default="")
    assert format_parsable(size)[:2] == [
        "mca:t:c:param:t_c_size:value:4096",
        f"mca:t:c:param:t_c_size:source:file ({conf}:1)",
    ]
    assert "mca:t:c:param:t_c_size:type:size_t" in format_parsable(size)
    assert "mca:t:c:param:t_c_ratio:type:double" in format_parsable(ratio)
    assert format_parsable(ratio)[0] == "mca:t:c:param:t_c_ratio:value:0.5"
    assert format_parsable(items)[0] == "mca:t:c:param:t_c_items:value:a,b"
    assert "mca:t:c:param:t_c_items:type:list" in format_parsable(items)


def test_readable_format(tmp_path: Path) -> None:
    s = space(environ={"PMCA_MCA_btl_base_verbose": "40"})
    verbose = s.register(
        "btl", "base", "verbose", type=VERBOSITY, default=0, help="Verbosity", level=8
    )
    lines = format_readable(verbose)
    assert lines[0] == (
        'parameter "btl_base_verbose" (current value: "info", data source: environment '
        "(PMCA_MCA_btl_base_verbose), level: 8 dev/detail, type: int)"
    )
    assert lines[1] == "Verbosity"
    # Open MPI 5.0.11's own text, which scrapers of ompi_info parse.
    assert lines[2] == (
        "Valid values: -1|none, 0|error, 10|component, 20|warn, 40|info, 60|trace, "
        "80|debug, 100|max, 0-100"
    )
    enabled = s.register("btl", "base", "enabled", type=bool, default=True, level=1)
    assert format_readable(enabled)[-1] == (
        "Valid values: 0|f|false|disabled|no|n, 1|t|true|enabled|yes|y"
    )
    real = s.get("mca_base_param_files")
    assert format_readable(real)[0].endswith(
        "level: 2 user/detail, type: string, synonyms: mca_param_files)"
    )
    assert format_readable(real, name="mca_param_files")[0].endswith(
        "type: string, deprecated, synonym of: mca_base_param_files)"
    )
    plain = s.register("t", "c", "s", type=str, default="x", help="line one\nline two")
    assert format_readable(plain) == [
        'parameter "t_c_s" (current value: "x", data source: default, level: 1 user/basic, '
        "type: string)",
        "line one",
        "line two",
    ]


def test_the_valid_text_of_a_check_is_in_both_dumps(make_space) -> None:
    """``valid=`` is shown readably (``Valid values:``, as for enumerations) and parsably."""
    from pmca.mca.params import format_parsable, format_readable, within

    space = make_space()
    param = space.register("test", "comp", "knob", type=int, default=3, help="h", **within(0, 9))
    assert format_readable(param)[-1] == "Valid values: 0 to 9"
    lines = format_parsable(param)
    assert "mca:test:comp:param:test_comp_knob:valid_values:0 to 9" in lines
    # In Open MPI's field order: after help (where enumerators go), before deprecated.
    fields = [line.split(":")[5] for line in lines]
    assert fields.index("help") < fields.index("valid_values") < fields.index("deprecated")
    word = space.register("test", "comp", "word", type=str, default="a", valid="a: or b")
    assert 'mca:test:comp:param:test_comp_word:valid_values:"a: or b"' in format_parsable(word)
