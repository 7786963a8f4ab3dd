"""``pmca info`` options and output forms that ``ompi_info`` 5.0.11 has."""

from __future__ import annotations

import platform
import sys
from pathlib import Path

import pytest


def test_path_all_lists_every_path_like_ompi_info(cli) -> None:
    result = cli("info", "--path", "all")
    assert result.code == 0, result.err
    labels = [line.split(":", 1)[0].strip() for line in result.lines]
    assert labels == [
        "Prefix",
        "Exec_prefix",
        "Bindir",
        "Libdir",
        "Incdir",
        "Pkglibdir",
        "Datadir",
        "Sysconfdir",
    ]
    assert result.lines[0].split(": ", 1)[1] == sys.prefix


def test_path_parsable_is_ompi_infos_key(cli) -> None:
    result = cli("info", "--path", "prefix", "--parsable")
    assert result.lines == [f"path:prefix:{sys.prefix}"]


def test_arch_and_hostname(cli) -> None:
    result = cli("info", "--arch", "--hostname", "--parsable")
    assert result.lines == [
        f"config:arch:{platform.machine()}-{sys.platform}",
        f"config:host:{platform.node()}",
    ]


def test_config_says_how_pmca_was_built(cli) -> None:
    result = cli("info", "-c", "--parsable")
    keys = [line.split(":", 2)[0] + ":" + line.split(":", 2)[1] for line in result.lines]
    assert "pmca:version" in keys and "config:arch" in keys and "compiler:c" in keys
    assert any(line.startswith("option:native-hooks:") for line in result.lines)


def test_type_shows_only_parameters_of_that_type(cli) -> None:
    result = cli("info", "-t", "bool", "--level", "9")
    heads = [line for line in result.lines if '" (current value: ' in line]
    assert heads, result.out
    assert all("type: bool" in line for line in heads)
    assert any('"memory_patcher_disable"' in line for line in heads)


def test_type_names_are_checked(cli) -> None:
    result = cli("info", "--type", "integer")
    assert result.code == 2
    assert "usage: pmca info" in result.err and "invalid choice: 'integer'" in result.err


def test_unknown_option_shows_infos_own_usage(cli) -> None:
    result = cli("info", "--bogus")
    assert result.code == 2
    assert result.err.startswith("usage: pmca info ")
    assert "pmca info: error: unrecognized arguments: --bogus" in result.err


def test_show_failed_says_when_nothing_failed(cli) -> None:
    result = cli("info", "--show-failed")
    assert result.code == 0
    assert result.lines[-1].split(": ", 1) == [
        "          Failed to load",
        "none: every framework and component imported and registered "
        "(open and query are not run here: 'pmca info --check' runs them)",
    ]


def test_valid_values_are_open_mpis_text(cli) -> None:
    result = cli("info", "--param", "mpi", "all", "--level", "9")
    assert "Valid values: -1|auto, 0|f|false|disabled|no|n, 1|t|true|enabled|yes|y" in result.out


@pytest.mark.parametrize("old", ["opal_leave_pinned", "opal_leave_pinned_pipeline"])
def test_opal_leave_pinned_synonyms(cli, old: str) -> None:
    new = old.replace("opal_", "mpi_")
    result = cli("info", "--param", "mpi", "all", "--level", "9", "--mca", old, "1")
    assert result.code == 0
    assert f'MCA opal base: parameter "{old}" (current value: "true"' in result.out
    assert f"deprecated, synonym of: {new})" in result.out
    assert f"pmca info: warning: MCA parameter {old!r} is deprecated; use {new!r}" in result.err
    by_old_name = cli("info", "--param", "opal", "all", "--level", "9", "--parsable")
    assert by_old_name.code == 0, by_old_name.err
    assert f"mca:opal:base:param:{old}:value:auto" in by_old_name.lines


def test_an_informational_parameter_is_read_only(cli) -> None:
    name = "mca_base_component_default_load_mode"
    result = cli("info", "--param", "mca", "base", "--level", "9", "--mca", name, "dso")
    assert result.code == 0
    assert f'informational "{name}" (current value: "static", data source: default' in result.out
    assert (
        f"pmca info: warning: MCA parameter {name!r} is informational (read-only); "
        f"ignoring the value 'dso' from command line"
    ) in result.err
    parsable = cli("info", "--param", "mca", "base", "--level", "9", "--parsable")
    assert f"mca:mca:base:param:{name}:status:read-only" in parsable.lines


def test_json_help_points_at_the_documented_section(cli) -> None:
    result = cli("info", "--help")
    assert "Command line, section 'pmca info --json'" in " ".join(result.out.split())
    page = Path(__file__).parents[2] / "docs" / "reference" / "cli.md"
    if page.exists():
        assert "## `pmca info --json`" in page.read_text()
