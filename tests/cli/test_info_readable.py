"""``pmca info`` readable output: components, parameters, sources, exclusion, failures."""

from __future__ import annotations

import json
import re

import pmca
from tests.cli.conftest import PluginFramework, Result


def label_column(result: Result) -> set[int]:
    """Where ``: `` ends the right-aligned label on every labelled line."""
    return {line.index(": ") for line in result.lines if re.match(r"\s*\S.*?: ", line)}


def line_with(result: Result, *parts: str) -> str:
    hits = [line for line in result.lines if all(part in line for part in parts)]
    assert hits, f"no line with {parts!r} in:\n{result.out}"
    return hits[0]


def test_default_lists_frameworks_components_and_failures(
    run_pmca, plugin_fw: PluginFramework, pmca_load_mode: str
) -> None:
    result = run_pmca("info", path=(plugin_fw.root,))
    assert result.code == 0, result.err
    fw = plugin_fw.name
    assert re.search(rf"^\s+pmca: {re.escape(pmca.__version__)}$", result.out, re.M)
    assert line_with(result, "Python: ")
    # The built-in frameworks are listed whatever state their components are in.
    for builtin in ("memory", "patcher"):
        assert re.search(rf"^\s+MCA {builtin}: \S", result.out, re.M), result.out
    alpha = line_with(result, f"MCA {fw}: alpha ")
    assert alpha.endswith(
        f"alpha (MCA v{pmca.__version__}, API v1.0.0, Component v2.3.4) {pmca_load_mode}, "
        f"entry point pmca.{fw}:alpha = {fw}_alpha:TestComponent "
        f"(distribution {plugin_fw.distribution})"
    )
    assert line_with(result, f"MCA {fw}: beta ")
    broken = line_with(result, f"MCA {fw}: broken ")
    assert broken.endswith(
        "broken (failed to load) import failed: ImportError: "
        "libfoo.so.3: cannot open shared object file"
    )
    summary = line_with(result, "Failed to load: ")
    assert f"{fw}/broken" in summary and "--show-failed" in summary
    assert len(label_column(result)) == 1, "labels are right-aligned to one column"
    assert 'parameter "' not in result.out, "no parameters without --param/--all"


def test_param_level_9_shows_value_source_level_and_type(cli, plugin_fw) -> None:
    fw = plugin_fw.name
    result = cli("info", "--param", fw, "alpha", "--level", "9")
    assert result.code == 0, result.err
    label = f"MCA {fw} alpha"
    assert f"{label}: {'-' * 51}" in result.lines[1]
    assert (
        f'{label}: parameter "{fw}_alpha_secret_knob" (current value: "7", '
        "data source: default, level: 9 dev/all, type: int)"
    ) in result.out
    assert f'parameter "{fw}_alpha_enable" (current value: "true"' in result.out
    # The help follows each parameter line, indented to the value column.
    help_line = result.lines[result.lines.index(line_with(result, "_secret_knob")) + 1]
    assert help_line.strip() == "A knob for developers only"
    assert help_line.index("A") == line_with(result, "_secret_knob").index(": ") + 2
    # Only the component asked for: its version line, not beta's; no base group.
    assert line_with(result, f"MCA {fw}: alpha ")
    assert f"MCA {fw}: beta" not in result.out
    assert f"MCA {fw} base" not in result.out


def test_level_filtering(cli, plugin_fw) -> None:
    fw = plugin_fw.name
    default = cli("info", "--param", fw, "alpha")
    assert f"{fw}_alpha_priority" in default.out
    assert f"{fw}_alpha_enable" not in default.out  # level 3
    assert f"{fw}_alpha_secret_knob" not in default.out  # level 9
    level3 = cli("info", "--param", fw, "alpha", "--level", "3")
    assert f"{fw}_alpha_enable" in level3.out
    assert f"{fw}_alpha_secret_knob" not in level3.out
    level9 = cli("info", "--params", fw, "all", "-l", "9")
    assert f"{fw}_alpha_secret_knob" in level9.out and f"{fw}_beta_secret_knob" in level9.out


def test_all_means_level_9_unless_told(cli, plugin_fw) -> None:
    fw = plugin_fw.name
    everything = cli("info", "--all")
    assert everything.code == 0
    assert f"{fw}_alpha_secret_knob" in everything.out
    assert "mca_base_component_dso" in everything.out
    assert line_with(everything, "pmca: ")
    assert f"{fw}_alpha_secret_knob" not in cli("info", "-a", "--level", "1").out


def test_mca_option_changes_value_and_source(run_pmca, plugin_fw) -> None:
    fw = plugin_fw.name
    result = run_pmca(
        "info", "--mca", f"{fw}_alpha_priority", "42", "--param", fw, "alpha",
        path=(plugin_fw.root,),
    )  # fmt: skip
    assert result.code == 0, result.err
    assert (
        f'parameter "{fw}_alpha_priority" (current value: "42", data source: command line, '
        "level: 1 user/basic, type: int)"
    ) in result.out


def test_environment_variable_is_the_source(run_pmca, plugin_fw) -> None:
    fw = plugin_fw.name
    variable = f"PMCA_MCA_{fw}_alpha_priority"
    result = run_pmca("info", "--param", fw, "alpha", env={variable: "5"}, path=(plugin_fw.root,))
    assert result.code == 0, result.err
    assert f'(current value: "5", data source: environment ({variable}), ' in result.out


def test_parameter_file_is_the_source_with_path_and_line(run_pmca, plugin_fw, tmp_path) -> None:
    fw = plugin_fw.name
    conf = tmp_path / "params.conf"
    conf.write_text(f"# tuning\n{fw}_alpha_secret_knob = 99\n")
    result = run_pmca(
        "info", "--param", fw, "alpha", "--level", "9",
        env={"PMCA_MCA_mca_base_param_files": str(conf)}, path=(plugin_fw.root,),
    )  # fmt: skip
    assert result.code == 0, result.err
    assert f'(current value: "99", data source: file ({conf}:2), ' in result.out


def test_command_line_beats_environment(cli, plugin_fw, monkeypatch) -> None:
    fw = plugin_fw.name
    monkeypatch.setenv(f"PMCA_MCA_{fw}_alpha_priority", "5")
    result = cli("info", "--mca", f"{fw}_alpha_priority", "6", "--param", fw, "alpha")
    assert '(current value: "6", data source: command line' in result.out


def test_excluded_components_are_marked(cli, plugin_fw) -> None:
    fw = plugin_fw.name
    result = cli("info", "--mca", fw, "^beta", "--param", fw, "all", "--level", "9")
    assert result.code == 0, result.err
    assert line_with(result, f"MCA {fw}: beta ").endswith(f'; excluded by {fw}="^beta"')
    assert "excluded" not in line_with(result, f"MCA {fw}: alpha ")
    assert re.search(
        rf"^\s*MCA \(-\) {fw} beta: parameter \"{fw}_beta_priority\"", result.out, re.M
    )
    assert re.search(rf"^\s*MCA {fw} alpha: parameter \"{fw}_alpha_priority\"", result.out, re.M)
    assert f'parameter "{fw}" (current value: "^beta", data source: command line' in result.out
    selected = cli("info", "--mca", fw, "^beta", "--param", fw, "all", "--selected-only")
    assert f"{fw}_beta_" not in selected.out and f"{fw}_alpha_priority" in selected.out


def test_framework_level_parameters_are_the_base_group(cli, plugin_fw) -> None:
    fw = plugin_fw.name
    result = cli("info", "--param", fw, "base", "--level", "9")
    assert result.code == 0, result.err
    assert f'MCA {fw} base: parameter "{fw}" (current value: "", data source: default, ' in (
        result.out
    )
    assert f'parameter "{fw}_base_verbose" (current value: "error"' in result.out
    assert "Valid values: " in result.out
    assert f"{fw}_alpha_" not in result.out


def test_core_parameters_and_deprecated_synonyms(cli) -> None:
    result = cli("info", "--param", "mca", "all", "--level", "9")
    assert result.code == 0, result.err
    assert (
        'MCA mca base: parameter "mca_base_component_static" (current value: "none"' in result.out
    )
    synonym = line_with(result, 'parameter "mca_component_path"')
    assert synonym.endswith("deprecated, synonym of: mca_base_component_path)")


def test_show_failed_says_where_from_and_why(cli, plugin_fw) -> None:
    fw = plugin_fw.name
    result = cli("info", "--show-failed")
    assert result.code == 0, result.err
    index = result.lines.index(line_with(result, f"MCA {fw}: broken (failed to load) "))
    detail = [line.strip() for line in result.lines[index + 1 :]]
    assert detail[0] == f"location: entry point pmca.{fw}:broken = {fw}_broken:TestComponent " + (
        f"(distribution {plugin_fw.distribution})"
    )
    assert detail[1] == f"distribution: {plugin_fw.distribution}"
    assert detail[2].startswith("Traceback (most recent call last):")
    assert "pmca:" not in result.out, "--show-failed alone prints no header"
    assert f"MCA {fw}: alpha" not in result.out


def test_framework_without_components_is_still_listed(cli, install_plugin, unique) -> None:
    from tests.conftest import framework_source

    fw = unique("emptyfw")
    install_plugin(
        f"dist-{fw}",
        entry_points={"pmca.frameworks": {fw: f"{fw}_decl:FRAMEWORK"}},
        modules={f"{fw}_decl": framework_source(fw)},
    )
    result = cli("info")
    assert line_with(result, f"MCA {fw}: ").endswith(f"MCA {fw}: (no components found)")


def test_a_framework_that_fails_to_load_is_reported(cli, install_plugin, unique) -> None:
    fw = unique("badfw")
    install_plugin(
        f"dist-{fw}",
        entry_points={"pmca.frameworks": {fw: f"{fw}_decl:FRAMEWORK"}},
        modules={f"{fw}_decl": "raise RuntimeError('no such thing')\n"},
    )
    result = cli("info")
    assert result.code == 0, result.err
    line = line_with(result, f"MCA {fw}: ")
    assert line.endswith("(framework failed to load) RuntimeError: no such thing")
    assert f"framework {fw}" in line_with(result, "Failed to load: ")


def test_load_mode_is_mixed_when_some_components_load_statically(cli, pmca_env) -> None:
    """``mca_base_component_dso=all`` with a component that forces static loading."""
    pmca_env["PMCA_MCA_mca_base_component_dso"] = "all"
    out = cli("info").out
    modes = re.findall(r"\(MCA v[^)]*\) (static|dso), ", out)
    assert "static" in modes and "dso" in modes  # memory/patcher always loads statically
    expected = f"mixed ({modes.count('static')} static, {modes.count('dso')} dso components)"
    assert re.search(rf"Component load mode: {re.escape(expected)}$", out, re.MULTILINE), out
    assert "option:load-mode:mixed" in cli("info", "--parsable").out.splitlines()
    summary = json.loads(cli("info", "--json").out)["load_mode"]
    assert summary["summary"] == "mixed"
    assert summary["components"] == {"static": modes.count("static"), "dso": modes.count("dso")}
    pmca_env["PMCA_MCA_mca_base_component_dso"] = "none"
    assert re.search(r"Component load mode: static$", cli("info").out, re.MULTILINE)


def test_valid_text_is_shown_without_json(cli, pmca_env) -> None:
    """A parameter's ``valid=`` text is in the readable and parsable output, not only JSON."""
    readable = cli("info", "--param", "btl", "tcp", "--level", "9").out.splitlines()
    at = next(i for i, x in enumerate(readable) if '"btl_tcp_keepalive_probes"' in x)
    assert readable[at + 2].strip() == "Valid values: 1 to 127 probes", readable[at + 2]
    parsable = cli("info", "--param", "btl", "tcp", "--level", "9", "--parsable").out
    assert "mca:btl:tcp:param:btl_tcp_keepalive_probes:valid_values:1 to 127 probes" in (
        parsable.splitlines()
    )
