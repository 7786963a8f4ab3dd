"""``pmca info``'s output cache: reused while nothing it came from changed, recomputed otherwise.

Each run is a real ``python -m pmca.cli`` process; a hit leaves the stored
file alone, a miss stores it anew (``os.replace``: a new inode).
"""

from __future__ import annotations

import shutil
import textwrap
from collections.abc import Callable
from pathlib import Path

import pytest

from pmca.cli import _info_cache
from tests.cli.conftest import Result, component_source
from tests.conftest import InstallPlugin, framework_source


class Cached:
    def __init__(
        self, run_pmca: Callable[..., Result], directory: Path, fw: str, root: Path
    ) -> None:
        self._run = run_pmca
        self.directory = directory
        self.fw = fw
        self.root = root

    def info(self, *, env: dict[str, str] | None = None, path: tuple[Path, ...] = ()) -> str:
        result = self._run(
            "info",
            "--param",
            self.fw,
            "all",
            "--parsable",
            env={"PMCA_INFO_CACHE": str(self.directory), **(env or {})},
            path=(*path, self.root),
        )
        assert result.code == 0, result.err
        return result.out

    def stored(self) -> set[tuple[str, int]]:
        """Every stored file with its inode: a new inode is a new store."""
        if not self.directory.exists():
            return set()
        return {(p.name, p.stat().st_ino) for p in self.directory.iterdir()}


@pytest.fixture
def cached(
    install_plugin: InstallPlugin,
    unique: Callable[[str], str],
    run_pmca: Callable[..., Result],
    tmp_path: Path,
) -> Cached:
    fw = unique("cachefw")
    root = install_plugin(
        f"dist-{fw}",
        entry_points={
            "pmca.frameworks": {fw: f"{fw}_decl:FRAMEWORK"},
            f"pmca.{fw}": {"alpha": f"{fw}_alpha:TestComponent"},
        },
        modules={f"{fw}_decl": framework_source(fw), f"{fw}_alpha": component_source(fw, "alpha")},
    )
    return Cached(run_pmca, tmp_path / "cache", fw, root)


def _module(cached: Cached, name: str) -> Path:
    return cached.root / f"{cached.fw}_{name}.py"


def test_an_unchanged_run_is_answered_from_the_cache(cached: Cached) -> None:
    first = cached.info()
    stored = cached.stored()
    assert len(stored) == 1
    assert cached.info() == first
    assert cached.stored() == stored  # a hit: nothing stored again
    assert f"mca:{cached.fw}:alpha:param:{cached.fw}_alpha_priority:value:10" in first


def test_an_mca_environment_variable_changes_the_answer(cached: Cached) -> None:
    cached.info()
    changed = cached.info(env={f"PMCA_MCA_{cached.fw}_alpha_priority": "42"})
    assert f"{cached.fw}_alpha_priority:value:42" in changed
    assert f"{cached.fw}_alpha_priority:value:10" in cached.info()


def test_editing_a_component_module_changes_the_answer(cached: Cached) -> None:
    cached.info()
    module = _module(cached, "alpha")
    module.write_text(module.read_text().replace("default=10", "default=1234"))
    assert f"{cached.fw}_alpha_priority:value:1234" in cached.info()


def test_installing_and_removing_a_distribution_changes_the_answer(cached: Cached) -> None:
    cached.info()
    root = _module(cached, "alpha").parent
    info = root / f"dist_{cached.fw}_beta-1.0.dist-info"
    info.mkdir()
    (info / "METADATA").write_text(f"Name: dist-{cached.fw}-beta\nVersion: 1.0\n")
    (info / "entry_points.txt").write_text(
        f"[pmca.{cached.fw}]\nbeta = {cached.fw}_beta:TestComponent\n"
    )
    (root / f"{cached.fw}_beta.py").write_text(component_source(cached.fw, "beta"))
    assert f"mca:{cached.fw}:beta:" in cached.info()
    shutil.rmtree(info)
    assert f"mca:{cached.fw}:beta:" not in cached.info()


def test_another_sys_path_changes_the_answer(cached: Cached, tmp_path: Path) -> None:
    cached.info()
    extra = tmp_path / "extra"
    info = extra / f"dist_{cached.fw}_gamma-1.0.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text(f"Name: dist-{cached.fw}-gamma\nVersion: 1.0\n")
    (info / "entry_points.txt").write_text(
        f"[pmca.{cached.fw}]\ngamma = {cached.fw}_gamma:TestComponent\n"
    )
    (extra / f"{cached.fw}_gamma.py").write_text(component_source(cached.fw, "gamma"))
    assert f"mca:{cached.fw}:gamma:" in cached.info(path=(extra,))
    assert f"mca:{cached.fw}:gamma:" not in cached.info()


def test_a_parameter_file_created_or_edited_changes_the_answer(
    cached: Cached, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The default files: ~/.pmca/mca-params.conf may be missing, then appear.
    monkeypatch.delenv("PMCA_MCA_mca_base_param_files")
    env = {"HOME": str(tmp_path)}
    assert f"{cached.fw}_alpha_priority:value:10" in cached.info(env=env)
    conf = tmp_path / ".pmca" / "mca-params.conf"
    conf.parent.mkdir()
    conf.write_text(f"{cached.fw}_alpha_priority = 5\n")
    assert f"{cached.fw}_alpha_priority:value:5" in cached.info(env=env)
    conf.write_text(f"{cached.fw}_alpha_priority = 6\n")
    assert f"{cached.fw}_alpha_priority:value:6" in cached.info(env=env)


def test_runs_with_warnings_or_failures_are_not_stored(
    cached: Cached, run_pmca: Callable[..., Result]
) -> None:
    # A misspelt parameter: a warning on stderr.
    warned = run_pmca(
        "info",
        env={"PMCA_INFO_CACHE": str(cached.directory), f"PMCA_MCA_{cached.fw}_alpah_priority": "1"},
        path=(cached.root,),
    )
    assert warned.code == 0 and "warning" in warned.err
    assert cached.stored() == set()
    module = _module(cached, "alpha")
    module.write_text("raise ImportError('libfoo.so.3: cannot open shared object file')\n")
    failed = run_pmca("info", env={"PMCA_INFO_CACHE": str(cached.directory)}, path=(cached.root,))
    assert failed.code == 0
    assert cached.stored() == set()


def test_pmca_version_and_format_are_part_of_the_key(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PMCA_INFO_CACHE", str(tmp_path))

    class Out:
        @staticmethod
        def isatty() -> bool:
            return False

    recorder = _info_cache.Recorder(["info"], str(tmp_path))
    recorder.store("stored text\n")
    assert _info_cache.lookup(["info"], Out()) == "stored text\n"  # type: ignore[arg-type]
    assert _info_cache.lookup(["info", "--all"], Out()) is None  # type: ignore[arg-type]
    monkeypatch.setattr(_info_cache, "__version__", "99.0.0")
    assert _info_cache.lookup(["info"], Out()) is None  # type: ignore[arg-type]


def test_the_cache_can_be_turned_off(cached: Cached, run_pmca: Callable[..., Result]) -> None:
    result = run_pmca("info", env={"PMCA_INFO_CACHE": "none"})
    assert result.code == 0
    assert not cached.directory.exists()
    assert textwrap.dedent(result.out)
