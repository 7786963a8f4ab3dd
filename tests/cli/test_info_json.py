"""``pmca info --json``: the documented schema, exclusion, failures, filtering."""

from __future__ import annotations

import json
from typing import Any

import pmca
from tests.cli.conftest import PluginFramework

TOP_KEYS = {
    "schema", "schema_version", "pmca", "python", "platform", "prefix", "load_mode",
    "param_files", "override_file", "level", "internal", "core_params", "frameworks",
    "framework_failures", "unknown_params",
}  # fmt: skip
FRAMEWORK_KEYS = {
    "name", "description", "api_version", "policy", "depends", "allow_dso", "location",
    "selection", "params", "components", "failures",
}  # fmt: skip
COMPONENT_KEYS = {
    "name", "version", "api_version", "load_mode", "location", "distribution", "admitted", "params",
}  # fmt: skip
PARAM_KEYS = {
    "name", "framework", "component", "value", "typed_value", "source", "source_detail",
    "data_source", "level", "level_name", "type", "help", "settable", "internal", "informational",
    "deprecated",
    "enumerators", "valid_values", "synonyms",
}  # fmt: skip
FAILURE_KEYS = {
    "framework", "component", "hook", "location", "distribution", "error_type", "message",
    "reason", "traceback",
}  # fmt: skip


def framework(document: dict[str, Any], name: str) -> dict[str, Any]:
    return next(f for f in document["frameworks"] if f["name"] == name)


def by_name(items: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    return {item["name"]: item for item in items}


def test_schema(run_pmca, plugin_fw: PluginFramework, pmca_load_mode: str) -> None:
    fw = plugin_fw.name
    result = run_pmca("info", "--json", path=(plugin_fw.root,))
    assert result.code == 0, result.err
    document = json.loads(result.out)
    assert set(document) == TOP_KEYS
    assert (document["schema"], document["schema_version"]) == ("pmca-info", 1)
    assert document["pmca"]["version"] == pmca.__version__
    assert document["level"] == 9, "--json shows everything unless --level says otherwise"
    assert {"memory", "patcher", fw} <= {f["name"] for f in document["frameworks"]}
    for entry in document["frameworks"]:
        assert set(entry) == FRAMEWORK_KEYS
        for component in entry["components"]:
            assert set(component) == COMPONENT_KEYS
            assert all(set(p) == PARAM_KEYS for p in component["params"])
        assert all(set(p) == PARAM_KEYS for p in entry["params"])
        assert all(set(f) == FAILURE_KEYS for f in entry["failures"])
    assert all(set(p) == PARAM_KEYS for p in document["core_params"])

    mine = framework(document, fw)
    assert (mine["api_version"], mine["policy"], mine["selection"]) == ("1.0.0", "multi", "")
    components = by_name(mine["components"])
    assert set(components) == {"alpha", "beta"}
    alpha = components["alpha"]
    assert alpha["version"] == "2.3.4" and alpha["api_version"] == "1.0.0"
    assert alpha["load_mode"] == pmca_load_mode
    assert alpha["location"].startswith(f"entry point pmca.{fw}:alpha = ")
    assert alpha["distribution"] == plugin_fw.distribution
    assert alpha["admitted"] is True
    params = by_name(alpha["params"])
    enable = params[f"{fw}_alpha_enable"]
    assert enable["value"] == "true" and enable["typed_value"] is True
    assert enable["type"] == "bool" and enable["level"] == 3
    assert enable["enumerators"] == [{"value": 0, "name": "false"}, {"value": 1, "name": "true"}]
    assert (enable["source"], enable["source_detail"], enable["data_source"]) == (
        "default",
        None,
        "default",
    )
    assert params[f"{fw}_alpha_secret_knob"]["level_name"] == "dev/all"
    [failure] = mine["failures"]
    assert (failure["component"], failure["hook"], failure["error_type"]) == (
        "broken",
        "import",
        "ImportError",
    )
    assert failure["message"] == "libfoo.so.3: cannot open shared object file"
    assert failure["distribution"] == plugin_fw.distribution
    assert "Traceback" in failure["traceback"]
    core = by_name(document["core_params"])
    assert core["mca_base_component_path"]["synonyms"] == [
        {"name": "mca_component_path", "deprecated": True}
    ]


def test_exclusion_sources_and_level(cli, plugin_fw, monkeypatch) -> None:
    fw = plugin_fw.name
    monkeypatch.setenv(f"PMCA_MCA_{fw}_beta_priority", "3")
    result = cli("info", "--json", "--level", "2", "--mca", fw, "^beta")
    document = json.loads(result.out)
    mine = framework(document, fw)
    assert mine["selection"] == "^beta"
    components = by_name(mine["components"])
    assert components["beta"]["admitted"] is False and components["alpha"]["admitted"] is True
    selection = by_name(mine["params"])[fw]
    assert (selection["source"], selection["data_source"]) == ("command line", "command line")
    beta = by_name(components["beta"]["params"])
    assert set(beta) == {f"{fw}_beta_priority"}, "levels 1-2 only"
    assert beta[f"{fw}_beta_priority"]["typed_value"] == 3
    assert (
        beta[f"{fw}_beta_priority"]["data_source"] == f"environment (PMCA_MCA_{fw}_beta_priority)"
    )
    assert beta[f"{fw}_beta_priority"]["source_detail"] == f"PMCA_MCA_{fw}_beta_priority"


def test_param_narrows_the_document(cli, plugin_fw) -> None:
    fw = plugin_fw.name
    document = json.loads(cli("info", "--json", "--param", fw, "alpha").out)
    assert [f["name"] for f in document["frameworks"]] == [fw]
    mine = document["frameworks"][0]
    assert [c["name"] for c in mine["components"]] == ["alpha"]
    assert mine["params"] == [] and document["core_params"] == []


def test_unknown_parameters_are_listed(cli, plugin_fw) -> None:
    result = cli("info", "--json", "--mca", "no_such_param", "1")
    assert result.code == 0
    assert {"name": "no_such_param", "data_source": "command line"} in json.loads(result.out)[
        "unknown_params"
    ]
    assert "no_such_param" in result.err


def test_verbose_output_never_lands_in_the_json(cli, plugin_fw) -> None:
    fw = plugin_fw.name
    result = cli(
        "info",
        "--json",
        "--mca",
        "mca_base_verbose",
        "stdout",
        "--mca",
        f"{fw}_base_verbose",
        "100",
    )
    assert result.code == 0, result.err
    json.loads(result.out)
    assert "broken" in result.err, "the framework's log went to stderr instead"


def test_the_documentation_names_every_key() -> None:
    """``--json`` help points at the command-line page's schema: it must name every field."""
    from pathlib import Path

    page = (Path(__file__).parents[2] / "docs" / "reference" / "cli.md").read_text()
    section = page.split("## `pmca info --json`", 1)[1].split("\n## ", 1)[0]
    keys = TOP_KEYS | FRAMEWORK_KEYS | COMPONENT_KEYS | PARAM_KEYS | FAILURE_KEYS
    assert sorted(key for key in keys if f'"{key}"' not in section) == []
