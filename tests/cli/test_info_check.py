"""``pmca info --check`` opens and queries each component alone; ``--show-failed`` does not."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from tests.cli.conftest import RunCli
from tests.conftest import InstallPlugin, component_source, framework_source

DECLINES = """
import pmca

class TestComponent(pmca.Component):
    framework = {fw!r}
    name = "shy"

    @pmca.hookimpl
    def query(self, ctx):
        return None
"""


def _install(install_plugin: InstallPlugin, fw: str, sources: dict[str, str]) -> None:
    """Framework ``fw`` with a component per ``name: source`` (module ``<fw>_<name>``)."""
    install_plugin(
        f"dist-{fw}",
        entry_points={
            "pmca.frameworks": {fw: f"{fw}_decl:FRAMEWORK"},
            f"pmca.{fw}": {name: f"{fw}_{name}:TestComponent" for name in sources},
        },
        modules={
            f"{fw}_decl": framework_source(fw),
            **{f"{fw}_{name}": source for name, source in sources.items()},
        },
    )


@pytest.fixture
def checked_fw(install_plugin: InstallPlugin, unique: Callable[[str], str]) -> str:
    """Framework ``<fw>``: ``good``, ``shy`` (declines), ``opener`` (raises in open), ``gone``."""
    fw = unique("chk")
    _install(
        install_plugin,
        fw,
        {
            "good": component_source(fw, "good", priority=7),
            "shy": DECLINES.format(fw=fw),
            "opener": component_source(fw, "opener", fail_in="open"),
            "gone": "import nonexistent_module_zz\n",
        },
    )
    return fw


def test_check_reports_each_component_and_fails_if_one_failed(cli: RunCli, checked_fw) -> None:
    fw = checked_fw
    result = cli("info", "--check", fw)
    assert result.code == 1
    label = f"MCA {fw}"
    assert [line.strip() for line in result.lines] == [
        f"{label}: gone: failed: import failed: ModuleNotFoundError: "
        "No module named 'nonexistent_module_zz'",
        f"{label}: good: available: opened, query offered priority 7",
        f"{label}: opener: failed: open failed: RuntimeError: boom in open",
        f"{label}: shy: declined: query returned None (declined selection)",
        "Checked: 4 components: 1 available, 1 declined, 2 failed",
    ]
    assert result.err == ""


def test_check_one_component_parsable(cli: RunCli, checked_fw) -> None:
    fw = checked_fw
    result = cli("info", "--check", f"{fw}/good", "--parsable")
    assert result.code == 0
    assert result.lines == [
        f"mca:{fw}:good:check:available:opened, query offered priority 7",
        "check:available:1",
        "check:declined:0",
        "check:failed:0",
    ]


def test_check_names_what_does_not_exist(cli: RunCli, checked_fw) -> None:
    result = cli("info", "--check", f"{checked_fw}/nope")
    assert result.code == 2
    assert (
        f"--check: framework {checked_fw!r} has no component 'nope' (gone, good, opener, shy)"
        in result.err
    )


def test_show_failed_says_it_does_not_open(
    cli: RunCli, install_plugin: InstallPlugin, unique: Callable[[str], str]
) -> None:
    """A component raising in ``open`` is no load failure: ``--show-failed`` says what it ran."""
    fw = unique("opens")
    _install(install_plugin, fw, {"opener": component_source(fw, "opener", fail_in="open")})
    result = cli("info", "--show-failed")
    assert result.code == 0
    assert "opener" not in result.out, "pmca info never opens a component"
    assert result.lines[-1].endswith(
        "imported and registered (open and query are not run here: 'pmca info --check' runs them)"
    )
    checked = cli("info", "--check", fw)
    assert checked.code == 1
    assert (
        checked.lines[0].split(": ", 1)[1]
        == "opener: failed: open failed: RuntimeError: boom in open"
    )
