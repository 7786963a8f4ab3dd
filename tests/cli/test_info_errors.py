"""Bad input: a message on stderr naming the problem, exit code 2, never a traceback."""

from __future__ import annotations

import pytest

from tests.cli.conftest import PluginFramework, Result


def refused(result: Result, *needles: str) -> None:
    assert result.code == 2, (result.out, result.err)
    assert result.out == ""
    assert "Traceback" not in result.err
    for needle in needles:
        assert needle in result.err, result.err


@pytest.mark.parametrize("level", ["0", "10", "-1", "nine"])
def test_bad_level(cli, level: str) -> None:
    refused(
        cli("info", "--param", "mca", "all", "--level", level), f"invalid level '{level}'", "1-9"
    )


def test_bad_level_in_a_real_process(run_pmca) -> None:
    refused(run_pmca("info", "--all", "--level", "10"), "invalid level '10'")


def test_unknown_framework(cli) -> None:
    refused(cli("info", "--param", "nosuchfw", "all"), "unknown framework 'nosuchfw'", "memory")


def test_unknown_component(cli, plugin_fw: PluginFramework) -> None:
    fw = plugin_fw.name
    refused(
        cli("info", "--param", fw, "gamma"),
        f"unknown component 'gamma' in framework '{fw}'",
        "alpha, beta, broken",
    )


def test_bad_value_for_a_framework_parameter(cli, plugin_fw) -> None:
    fw = plugin_fw.name
    refused(
        cli("info", "--mca", f"{fw}_base_verbose", "loud"),
        f"'{fw}_base_verbose'",
        "'loud'",
        "command line",
    )


def test_bad_value_for_a_component_parameter(run_pmca, plugin_fw) -> None:
    fw = plugin_fw.name
    result = run_pmca(
        "info", "--mca", f"{fw}_alpha_priority", "high", "--param", fw, "all",
        path=(plugin_fw.root,),
    )  # fmt: skip
    refused(result, f"'{fw}_alpha_priority'", "'high'")


def test_bad_selection_list(cli, plugin_fw) -> None:
    refused(cli("info", "--mca", plugin_fw.name, "alpha,^beta"), "'^'")


def test_parameter_given_twice(cli) -> None:
    refused(
        cli("info", "--mca", "memory", "none", "--mca", "memory", "patcher"),
        "'memory' given more than once",
    )


def test_missing_parameter_file(cli, monkeypatch, tmp_path) -> None:
    missing = tmp_path / "missing.conf"
    monkeypatch.setenv("PMCA_MCA_mca_base_param_files", str(missing))
    refused(cli("info"), str(missing))


def test_output_styles_exclude_each_other(cli) -> None:
    refused(cli("info", "--json", "--parsable"), "not allowed with")


def test_unknown_parameter_only_warns(cli) -> None:
    result = cli("info", "--mca", "no_such_param", "1")
    assert result.code == 0
    assert "pmca info: warning: " in result.err and "'no_such_param'" in result.err
