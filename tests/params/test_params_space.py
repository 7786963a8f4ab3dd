"""Registration, synonyms, run-time set, lock, deregistration and error messages."""

from __future__ import annotations

import threading
import warnings
from pathlib import Path
from typing import Any

import pytest

import pmca.mca.params as params_pkg
from pmca.mca.params import (
    AUTO_BOOL,
    VERBOSITY,
    InfoLevel,
    Origin,
    ParamError,
    ParamPermissionError,
    ParamRegistrationError,
    ParamSpace,
    ParamType,
    ParamValueError,
    ParamWarning,
    PmcaDeprecationWarning,
    Source,
    UnknownParamError,
)


def space_with(**kw: Any) -> ParamSpace:
    kw.setdefault("environ", {})
    kw.setdefault("param_files", [])
    kw.setdefault("override_file", "none")
    return ParamSpace(**kw)


# -- names ----------------------------------------------------------------------------


def test_full_names() -> None:
    space = space_with()
    selection = space.register("btl", None, None, type=str, default="", help="selection")
    verbose = space.register("btl", "base", "verbose", type=VERBOSITY, default=0)
    port = space.register("btl", "tcp", "port_min", type=int, default=1024)
    pinned = space.register("mpi", None, "leave_pinned", type=AUTO_BOOL, default=-1)
    assert [p.full_name for p in (selection, verbose, port, pinned)] == [
        "btl",
        "btl_base_verbose",
        "btl_tcp_port_min",
        "mpi_leave_pinned",
    ]
    assert (selection.framework, selection.component, selection.name) == ("btl", None, None)
    assert (port.framework, port.component, port.name) == ("btl", "tcp", "port_min")
    core = space.get("mca_base_param_files")
    assert (core.framework, core.component, core.name) == ("mca", "base", "param_files")
    assert space.params(framework="btl", component="base") == [selection, verbose]
    assert space.params(framework="btl") == [selection, verbose, port]


@pytest.mark.parametrize(
    ("framework", "component", "name"),
    [("Btl", "tcp", "x"), ("b_tl", "tcp", "x"), ("btl", "Tcp", "x"), ("btl", "tcp", "x-y")],
)
def test_invalid_names_rejected(framework: str, component: str, name: str) -> None:
    with pytest.raises(ParamRegistrationError, match="invalid"):
        space_with().register(framework, component, name, type=int, default=0)


def test_type_spellings() -> None:
    space = space_with()
    cases = [
        (bool, ParamType.BOOL),
        (int, ParamType.INT),
        (float, ParamType.FLOAT),
        (str, ParamType.STRING),
        (list, ParamType.LIST),
        ("size", ParamType.SIZE),
        (ParamType.SIZE, ParamType.SIZE),
        (VERBOSITY, ParamType.INT),
    ]
    for index, (spec, expected) in enumerate(cases):
        default = "" if expected in (ParamType.STRING, ParamType.LIST) else 0
        param = space.register("t", "c", f"p{index}", type=spec, default=default)
        assert param.type is expected
    assert space.get("t_c_p7").enumeration is VERBOSITY
    with pytest.raises(ParamRegistrationError, match="unsupported parameter type"):
        space.register("t", "c", "bad", type=dict, default=0)
    with pytest.raises(ParamRegistrationError, match="enumerations apply to int"):
        space.register("t", "c", "bad", type=str, default="x", enumeration=VERBOSITY)
    with pytest.raises(ParamRegistrationError):
        space.register("t", "c", "bad", type=int, default=0, level=10)


def test_info_level_and_source_labels() -> None:
    assert [lvl.label for lvl in InfoLevel][:3] == ["user/basic", "user/detail", "user/all"]
    assert str(InfoLevel(9)) == "9 dev/all"
    assert str(InfoLevel.TUNER_DETAIL) == "5 tuner/detail"
    assert Source.DEFAULT < Source.FILE < Source.ENV < Source.API < Source.SET < Source.OVERRIDE
    assert [str(s) for s in Source] == [
        "default",
        "file",
        "environment",
        "command line",
        "set",
        "override",
    ]
    assert str(Origin(Source.ENV, "PMCA_MCA_btl")) == "environment (PMCA_MCA_btl)"
    assert str(Origin.file("/x.conf", 12)) == "file (/x.conf:12)"
    assert str(Origin.file("/o.conf", 3, override=True)) == "override (/o.conf:3)"
    assert str(Origin(Source.API)) == "command line"


# -- registration semantics -------------------------------------------------------------


def test_reregistering_same_definition_returns_same_param() -> None:
    space = space_with()
    first = space.register("t", "c", "x", type=int, default=1, help="h", settable=True)
    space.set("t_c_x", 5)
    again = space.register("t", "c", "x", type=int, default=1, help="h", settable=True)
    assert again is first
    assert again.value == 5  # an idempotent registration does not re-resolve


def test_conflicting_registration_is_an_error() -> None:
    space = space_with()
    space.register("t", "c", "x", type=int, default=1)
    with pytest.raises(
        ParamRegistrationError, match="type int; cannot register it again with type string"
    ):
        space.register("t", "c", "x", type=str, default="1")
    with pytest.raises(ParamRegistrationError, match=r"different definition.*default 1 != 2"):
        space.register("t", "c", "x", type=int, default=2)
    with pytest.raises(ParamRegistrationError, match="already belongs to 't_c_x'"):
        space.register("t", "c", "y", type=int, default=0, synonyms=["t_c_x"])


def test_invalid_default_names_the_default_source() -> None:
    with pytest.raises(ParamValueError, match=r"'nope' for MCA parameter 't_c_x' from default"):
        space_with().register("t", "c", "x", type=int, default="nope")


def test_string_default_may_be_unset() -> None:
    param = space_with().register("t", "c", "x", type=str, default=None)
    assert param.value is None
    assert param.value_string() == ""


def test_deregister_and_reregister_re_resolves(tmp_path: Path) -> None:
    conf = tmp_path / "p.conf"
    conf.write_text("t_c_x = 7\n", encoding="utf-8")
    space = space_with(param_files=[conf])
    param = space.register("t", "c", "x", type=int, default=0, settable=True, synonyms=["old_x"])
    other = space.register("t", "d", "y", type=int, default=0)
    space.set("t_c_x", 99)
    assert space.deregister_group("t", "c") == ["t_c_x"]
    assert not param.registered
    assert "t_c_x" not in space and "old_x" not in space
    assert space.params(framework="t") == [other]
    with pytest.raises(UnknownParamError):
        space.get("t_c_x")
    again = space.register("t", "c", "x", type=int, default=0, settable=True, synonyms=["old_x"])
    assert again is param
    assert space.get("t_c_x").registered
    assert param.value == 7  # the run-time set is gone; the file value is back
    assert str(param.origin) == f"file ({conf}:1)"
    # A different type after deregistration is a new parameter, not an error.
    space.deregister("old_x")
    fresh = space.register("t", "c", "x", type=str, default="s")
    assert fresh is not param and fresh.value == "7"


def test_deregister_framework_group_includes_its_components() -> None:
    space = space_with()
    space.register("btl", None, None, type=str, default="")
    space.register("btl", "base", "verbose", type=VERBOSITY, default=0)
    space.register("btl", "tcp", "port", type=int, default=0)
    space.register("mpi", None, "leave_pinned", type=AUTO_BOOL, default=-1, group="rcache_grdma")
    space.register("rcache", "grdma", "size", type="size", default="1m")
    assert space.groups() == ["mca_base", "btl", "btl_base", "btl_tcp", "rcache_grdma"]
    assert space.deregister_group("rcache", "grdma") == ["mpi_leave_pinned", "rcache_grdma_size"]
    assert space.deregister_group("btl") == ["btl", "btl_base_verbose", "btl_tcp_port"]
    assert [p.full_name for p in space.params()] == [
        "mca_base_param_files",
        "mca_base_override_param_file",
    ]


def test_pending_values_wait_for_registration_and_unknown_names(tmp_path: Path) -> None:
    conf = tmp_path / "p.conf"
    conf.write_text("btl_tcp_port = 5\nbtl_tpc_typo = 1\n", encoding="utf-8")
    space = space_with(
        environ={"PMCA_MCA_btl": "tcp", "PMCA_MCA_old_name": "1", "OTHER": "x", "PMCA_MCA_": "y"},
        api={"mystery": 1},
        param_files=[conf],
    )
    assert space.unknown_names() == ["btl", "btl_tcp_port", "btl_tpc_typo", "mystery", "old_name"]
    space.register("btl", None, None, type=str, default="")
    space.register("btl", "tcp", "port", type=int, default=0)
    with pytest.warns(PmcaDeprecationWarning):
        space.register("t", "c", "new_name", type=int, default=0, deprecated_synonyms=["old_name"])
    assert space.unknown_names() == ["btl_tpc_typo", "mystery"]
    assert str(space.unknown_origins()["btl_tpc_typo"]) == f"file ({conf}:2)"
    assert space.value("btl") == "tcp"


# -- synonyms and deprecation ---------------------------------------------------------


def test_deprecated_synonym_from_each_source_warns_and_applies(tmp_path: Path) -> None:
    conf = tmp_path / "p.conf"
    conf.write_text("btl_old_knob = 11\n", encoding="utf-8")
    cases: list[tuple[dict[str, Any], str, int]] = [
        ({"param_files": [conf]}, f"file ({conf}:1)", 11),
        ({"environ": {"PMCA_MCA_btl_old_knob": "12"}}, "environment (PMCA_MCA_btl_old_knob)", 12),
        ({"api": {"btl_old_knob": 13}}, "command line", 13),
    ]
    for kwargs, origin_text, expected in cases:
        space = space_with(**kwargs)
        with pytest.warns(PmcaDeprecationWarning) as record:
            param = space.register(
                "btl", "new", "knob", type=int, default=0, deprecated_synonyms=["btl_old_knob"]
            )
        message = str(record[0].message)
        assert "'btl_old_knob' is deprecated" in message
        assert "use 'btl_new_knob'" in message
        assert origin_text in message
        assert param.value == expected
        assert str(param.origin) == origin_text
        assert issubclass(PmcaDeprecationWarning, DeprecationWarning)


def test_new_name_wins_over_deprecated_at_the_same_level() -> None:
    space = space_with(api={"btl_old_knob": 1, "btl_new_knob": 2})
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # the ignored deprecated value does not warn
        param = space.register(
            "btl", "new", "knob", type=int, default=0, deprecated_synonyms=["btl_old_knob"]
        )
    assert param.value == 2


def test_deprecated_name_at_a_higher_level_still_wins() -> None:
    space = space_with(environ={"PMCA_MCA_btl_new_knob": "1"}, api={"btl_old_knob": 2})
    with pytest.warns(PmcaDeprecationWarning, match="command line"):
        param = space.register(
            "btl", "new", "knob", type=int, default=0, deprecated_synonyms=["btl_old_knob"]
        )
    assert param.value == 2


def test_plain_synonym_applies_silently_and_resolves_by_get() -> None:
    space = space_with(environ={"PMCA_MCA_alias_knob": "3"})
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        param = space.register("t", "c", "knob", type=int, default=0, synonyms=["alias_knob"])
    assert param.value == 3
    assert space.get("alias_knob") is param
    assert [(s.name, s.deprecated) for s in param.synonyms] == [("alias_knob", False)]


def test_core_param_files_deprecated_synonym(tmp_path: Path) -> None:
    conf = tmp_path / "legacy.conf"
    conf.write_text("t_c_x = 4\n", encoding="utf-8")
    with pytest.warns(PmcaDeprecationWarning, match="'mca_param_files'.*'mca_base_param_files'"):
        space = ParamSpace(environ={"PMCA_MCA_mca_param_files": str(conf)}, override_file="none")
    assert space.register("t", "c", "x", type=int, default=0).value == 4


def test_invalid_value_under_deprecated_name_names_both() -> None:
    space = space_with(api={"btl_old_knob": "many"})
    with pytest.warns(PmcaDeprecationWarning), pytest.raises(ParamValueError) as info:
        space.register(
            "btl", "new", "knob", type=int, default=0, deprecated_synonyms=["btl_old_knob"]
        )
    assert "'btl_new_knob' (given as 'btl_old_knob')" in str(info.value)


# -- run-time set and lock --------------------------------------------------------------


def test_set_requires_settable() -> None:
    space = space_with()
    space.register("t", "c", "ro", type=int, default=0)
    with pytest.raises(ParamPermissionError) as info:
        space.set("t_c_ro", 3)
    message = str(info.value)
    assert "'t_c_ro'" in message and "'3'" in message and "(from set)" in message
    assert "read-only" in message


def test_set_validates_and_keeps_old_value_on_error() -> None:
    space = space_with()
    param = space.register("t", "c", "v", type=VERBOSITY, default="error", settable=True)
    assert param.value == 0
    with pytest.raises(ParamValueError, match=r"'chatty'.*from set.*valid values: -1: none"):
        space.set("t_c_v", "chatty")
    assert param.value == 0 and str(param.origin) == "default"
    assert space.set("t_c_v", "DEBUG") is param
    assert param.value == 80


def test_set_through_deprecated_name_warns() -> None:
    space = space_with()
    param = space.register(
        "t", "c", "x", type=int, default=0, settable=True, deprecated_synonyms=["t_old_x"]
    )
    with pytest.warns(PmcaDeprecationWarning, match="'t_old_x'.*'t_c_x'.*set"):
        space.set("t_old_x", 2)
    assert param.value == 2


def test_lock_and_unlock_framework() -> None:
    space = space_with()
    a = space.register("btl", "tcp", "a", type=int, default=0, settable=True)
    b = space.register("memory", "patcher", "b", type=int, default=0, settable=True)
    space.lock("btl")
    assert not a.settable and b.settable
    with pytest.raises(ParamPermissionError, match="framework 'btl' is open"):
        space.set("btl_tcp_a", 1)
    space.set("memory_patcher_b", 1)
    space.unlock("btl")
    space.set("btl_tcp_a", 1)
    assert a.value == 1 and a.settable


def test_lock_does_not_survive_deregistration() -> None:
    # A framework that closes (deregistering its parameters) and opens again
    # must not find its parameters still locked from the previous open.
    space = space_with()
    a = space.register("btl", "tcp", "a", type=int, default=0, settable=True)
    space.lock("btl")
    assert not a.settable
    assert space.register("btl", "tcp", "a", type=int, default=0, settable=True) is a
    assert not a.settable  # idempotent re-registration keeps the lock
    space.deregister_group("btl")
    again = space.register("btl", "tcp", "a", type=int, default=0, settable=True)
    assert again is a and again.settable
    space.set("btl_tcp_a", 2)
    assert a.value == 2


def test_override_lock_names_file_and_line(tmp_path: Path) -> None:
    over = tmp_path / "override.conf"
    over.write_text("# admin\nt_c_x = 9\n", encoding="utf-8")
    space = space_with(override_file=over)
    param = space.register("t", "c", "x", type=int, default=0, settable=True)
    with pytest.raises(ParamPermissionError) as info:
        space.set("t_c_x", "1")
    error = info.value
    assert error.why == f"locked by override file {over}:2"
    assert str(error) == (
        f"cannot set MCA parameter 't_c_x' to '1' (from set): locked by override file {over}:2"
    )
    assert param.read_only_reason == error.why


def test_override_warns_about_ignored_explicit_values(tmp_path: Path) -> None:
    over = tmp_path / "override.conf"
    over.write_text("t_c_x = 9\n", encoding="utf-8")
    space = space_with(override_file=over, environ={"PMCA_MCA_t_c_x": "1"})
    with pytest.warns(ParamWarning, match=r"override file .*ignoring the value from environment"):
        assert space.register("t", "c", "x", type=int, default=0).value == 9


# -- errors -------------------------------------------------------------------------------


def test_value_error_from_file_names_everything(tmp_path: Path) -> None:
    conf = tmp_path / "p.conf"
    conf.write_text("\n\nbtl_tcp_port = eighty\n", encoding="utf-8")
    space = space_with(param_files=[conf])
    with pytest.raises(ParamValueError) as info:
        space.register("btl", "tcp", "port", type=int, default=0)
    error = info.value
    message = str(error)
    assert "'btl_tcp_port'" in message
    assert "'eighty'" in message
    assert f"file ({conf}:3)" in message
    assert "valid values: an integer" in message
    assert (error.param_name, error.value) == ("btl_tcp_port", "eighty")
    assert error.origin == Origin(Source.FILE, f"{conf}:3")
    # A failed registration registers nothing.
    assert "btl_tcp_port" not in space


def test_enum_error_lists_valid_values() -> None:
    space = space_with(environ={"PMCA_MCA_mpi_leave_pinned": "sometimes"})
    with pytest.raises(ParamValueError) as info:
        space.register("mpi", None, "leave_pinned", type=AUTO_BOOL, default="auto")
    message = str(info.value)
    assert "environment (PMCA_MCA_mpi_leave_pinned)" in message
    assert "0: false|f|disabled|no|n, 1: true|t|enabled|yes|y, -1: auto" in message


def test_unknown_param_error_suggests_close_matches() -> None:
    space = space_with()
    space.register("btl", "tcp", "port_min", type=int, default=0)
    with pytest.raises(UnknownParamError) as info:
        space.get("btl_tcp_prot_min")
    assert "did you mean: btl_tcp_port_min?" in str(info.value)
    assert isinstance(info.value, LookupError) and isinstance(info.value, ParamError)
    with pytest.raises(UnknownParamError, match=r"unknown MCA parameter 'zzz'$"):
        space.value("zzz")


def test_public_api_is_explicit() -> None:
    assert sorted(params_pkg.__all__) == sorted(set(params_pkg.__all__))
    for name in params_pkg.__all__:
        assert hasattr(params_pkg, name)


# -- threads ----------------------------------------------------------------------------------


def test_concurrent_registration_and_set() -> None:
    space = space_with(api={"t_c_shared": 5})
    results: list[object] = []
    errors: list[BaseException] = []
    barrier = threading.Barrier(8)

    def worker(index: int) -> None:
        try:
            barrier.wait()
            for round_ in range(50):
                shared = space.register("t", "c", "shared", type=int, default=0, settable=True)
                results.append(shared)
                space.register("t", f"w{index}", f"p{round_}", type=int, default=round_)
                space.set("t_c_shared", index)
        except BaseException as exc:  # pragma: no cover - reported below
            errors.append(exc)

    threads = [threading.Thread(target=worker, args=(i,)) for i in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert not errors
    assert len({id(r) for r in results}) == 1
    assert len(space.params(framework="t")) == 1 + 8 * 50
    assert space.value("t_c_shared") in range(8)


def test_warnings_are_attributed_to_the_registering_code() -> None:
    space = space_with(environ={"PMCA_MCA_t_old_x": "1"})
    with pytest.warns(PmcaDeprecationWarning) as record:
        space.register("t", "c", "x", type=int, default=0, deprecated_synonyms=["t_old_x"])
    assert record[0].filename == __file__
