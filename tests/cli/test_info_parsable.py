"""``pmca info --parsable``: every line in Open MPI's ``ompi_info --parsable`` grammar."""

from __future__ import annotations

import re

import pmca
from tests.cli.conftest import PluginFramework

FW = r"[a-z][a-z0-9]*"
COMP = r"[a-z][a-z0-9_]*"
PARAM_FIELD = "|".join(
    [
        r"value:.*",
        r"source:(default|command line|set|environment \(PMCA_MCA_\w+\)"
        r"|(file|override) \(.+:\d+\))",
        r"status:(writeable|read-only)",
        r"level:[1-9]",
        r"help:.*",
        r"enumerator:value:-?\d+:\S+",
        r'valid_values:("([^"\\]|\\.)*"|[^:"]*)',
        r"deprecated:(yes|no)",
        r"type:(bool|int|size_t|double|string|list)",
        r"synonym_of:name:\w+",
        r"synonym:name:\w+",
        r"disabled:(true|false)",
    ]
)
QUOTED = r'"([^"\\]|\\.)*"'
#: ``ompi_info``'s records, then pmca's additions in the same key:value shape.
GRAMMAR = re.compile(
    "|".join(
        [
            rf'mca:{FW}:{COMP}:version:"(mca|api|component):\d+\.\d+\.\d+"',
            rf"mca:{FW}:{COMP}:param:\w+:({PARAM_FIELD})",
            rf"mca:{FW}:{COMP}:failed:({QUOTED}|[^:\"]*)",
            rf"mca:{FW}:{COMP}:(location|distribution|load-mode|disabled):({QUOTED}|[^:\"]*)",
            rf"framework:{FW}:(version|policy|location|components|failed|distribution"
            rf"|clashes-with):({QUOTED}|[^:\"]*)",
            rf"(pmca|python|config|path|option)(:[a-z-]+)+:({QUOTED}|[^:\"]*)",
        ]
    )
)

#: Lines of Open MPI 5.0.11's own ``ompi_info --all --parsable``: the grammar
#: above must accept the real thing, not just what pmca happens to print.
OPEN_MPI_LINES = [
    'mca:btl:self:version:"mca:2.1.0"',
    'mca:memory:patcher:version:"component:5.0.11"',
    'mca:mca:base:param:mca_component_path:value:"$PREFIX/lib/openmpi:~/.openmpi/components"',
    "mca:mca:base:param:mca_param_files:source:default",
    "mca:mca:base:param:mca_param_files:status:read-only",
    "mca:mca:base:param:mca_base_param_files:level:2",
    "mca:mca:base:param:mca_component_disable_dlopen:enumerator:value:0:false",
    "mca:mca:base:param:mca_param_files:deprecated:yes",
    "mca:mca:base:param:mca_base_suppress_override_warning:type:bool",
    "mca:mca:base:param:mca_param_files:synonym_of:name:mca_base_param_files",
    "mca:mca:base:param:mca_base_param_files:synonym:name:mca_param_files",
    "mca:mca:base:param:mca_base_env_list_delimiter:help:Set SHELL env variables delimiter. "
    "Default: semicolon ';'",
    "mca:memory:patcher:param:memory_patcher_priority:disabled:false",
]


def test_the_grammar_is_open_mpis() -> None:
    for line in OPEN_MPI_LINES:
        assert GRAMMAR.fullmatch(line), line


def test_every_line_matches_the_grammar(cli, plugin_fw: PluginFramework) -> None:
    fw = plugin_fw.name
    result = cli("info", "--all", "--parsable", "--mca", fw, "^beta", "--show-failed")
    assert result.code == 0, result.err
    assert len(result.lines) > 50
    bad = [line for line in result.lines if not GRAMMAR.fullmatch(line)]
    assert not bad, "\n".join(bad)


def test_default_parsable_output(run_pmca, plugin_fw, pmca_load_mode: str) -> None:
    fw = plugin_fw.name
    result = run_pmca("info", "--parseable", path=(plugin_fw.root,))
    assert result.code == 0, result.err
    assert all(GRAMMAR.fullmatch(line) for line in result.lines), result.out
    assert f"pmca:version:full:{pmca.__version__}" in result.lines
    key = f"mca:{fw}:alpha"
    assert result.lines[result.lines.index(f'{key}:version:"mca:{pmca.__version__}"') :][:7] == [
        f'{key}:version:"mca:{pmca.__version__}"',
        f'{key}:version:"api:1.0.0"',
        f'{key}:version:"component:2.3.4"',
        f"{key}:load-mode:{pmca_load_mode}",
        f'{key}:location:"entry point pmca.{fw}:alpha = {fw}_alpha:TestComponent '
        f'(distribution {plugin_fw.distribution})"',
        f"{key}:distribution:{plugin_fw.distribution}",
        f"{key}:disabled:false",
    ]
    assert (
        f'mca:{fw}:broken:failed:"import failed: ImportError: '
        'libfoo.so.3: cannot open shared object file"'
    ) in result.lines
    assert f"framework:{fw}:policy:multi" in result.lines
    assert not any(":param:" in line for line in result.lines)


def test_parameter_records_in_open_mpi_order(cli, plugin_fw) -> None:
    fw = plugin_fw.name
    result = cli("info", "--param", fw, "alpha", "--level", "9", "--parsable")
    prefix = f"mca:{fw}:alpha:param:{fw}_alpha_enable:"
    fields = [line[len(prefix) :] for line in result.lines if line.startswith(prefix)]
    assert fields == [
        "value:true",
        "source:default",
        "status:read-only",
        "level:3",
        "help:Whether alpha may be used",
        "enumerator:value:0:false",
        "enumerator:value:1:true",
        "deprecated:no",
        "type:bool",
        "disabled:false",
    ]
    # A value with a colon is quoted, as Open MPI does.
    assert f'mca:{fw}:alpha:param:{fw}_alpha_search_path:value:"/a:/b"' in result.lines


def test_sources_in_parsable_form(cli, plugin_fw, monkeypatch) -> None:
    fw = plugin_fw.name
    monkeypatch.setenv(f"PMCA_MCA_{fw}_alpha_secret_knob", "3")
    result = cli(
        "info", "--param", fw, "alpha", "-l", "9", "--parsable",
        "--mca", f"{fw}_alpha_priority", "11",
    )  # fmt: skip
    key = f"mca:{fw}:alpha:param:{fw}_alpha"
    assert f"{key}_priority:value:11" in result.lines
    assert f"{key}_priority:source:command line" in result.lines
    assert f"{key}_secret_knob:source:environment (PMCA_MCA_{fw}_alpha_secret_knob)" in (
        result.lines
    )


def test_excluded_component_parameters_are_disabled(cli, plugin_fw) -> None:
    fw = plugin_fw.name
    result = cli("info", "--param", fw, "all", "-l", "2", "--parsable", "--mca", fw, "^beta")
    assert f"mca:{fw}:beta:param:{fw}_beta_priority:disabled:true" in result.lines
    assert f"mca:{fw}:alpha:param:{fw}_alpha_priority:disabled:false" in result.lines
    assert f"mca:{fw}:beta:disabled:true" in result.lines
    assert f"mca:{fw}:base:param:{fw}:value:^beta" in result.lines


def test_show_failed_parsable(cli, plugin_fw) -> None:
    fw = plugin_fw.name
    result = cli("info", "--show-failed", "--parsable")
    key = f"mca:{fw}:broken"
    index = result.lines.index(
        f'{key}:failed:"import failed: ImportError: libfoo.so.3: cannot open shared object file"'
    )
    assert result.lines[index + 1].startswith(f'{key}:location:"entry point pmca.{fw}:broken')
    assert result.lines[index + 2] == f"{key}:distribution:{plugin_fw.distribution}"
    assert not any(line.startswith(f"mca:{fw}:alpha:") for line in result.lines)
