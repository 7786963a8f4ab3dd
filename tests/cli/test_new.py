"""``pmca new``: the generator's checks, and generated distributions passing their own tox."""

from __future__ import annotations

import json
import os
import platform
import subprocess
import sys
from pathlib import Path

import pytest

import pmca
from tests._matrix import elsewhere_in_matrix
from tests.cli.conftest import RunCli
from tests.conftest import InstallPlugin, framework_source


def files(root: Path) -> set[str]:
    return {str(path.relative_to(root)) for path in root.rglob("*") if path.is_file()}


# -- the generator ----------------------------------------------------------------


def test_component_distribution_has_every_part(cli: RunCli, tmp_path: Path):
    result = cli("new", "component", "btl", "fast_path", "--into", str(tmp_path))
    assert result.code == 0, result.err
    root = tmp_path / "pmca-btl-fast-path"
    assert f"wrote {root}" in result.out
    assert files(root) == {
        ".gitignore",
        "README.md",
        "pyproject.toml",
        "tox.ini",
        "src/pmca_btl_fast_path/__init__.py",
        "tests/test_pmca_btl_fast_path.py",
    }
    project = (root / "pyproject.toml").read_text()
    assert (
        '[project.entry-points."pmca.btl"]\nfast_path = "pmca_btl_fast_path:FastPathComponent"\n'
        in project
    )
    assert f'dependencies = ["pmca>={pmca.__version__}"]' in project
    tox = (root / "tox.ini").read_text()
    assert "env_list = static, dso" in tox
    source = installed_from()
    readme = (root / "README.md").read_text()
    if source is None:
        assert f"{{env:PMCA_SPEC:pmca>={pmca.__version__}}}" in tox
        assert "from the package index" in readme
    else:
        # pmca is on no index: tox takes the pmca that wrote the distribution.
        assert f"{{env:PMCA_SPEC:{source}}}" in tox
        assert f"tox installs it from `{source}`" in " ".join(readme.split())
    for file in root.rglob("*.py"):
        compile(file.read_text(), str(file), "exec")
    assert "PMCA_SPEC" in readme
    # The wheel name the README shows is the one pmca's `make wheel` writes.
    machine = platform.machine()
    tag = f"py3-none-manylinux2014_{machine}.manylinux_2_17_{machine}"
    assert f"dist/pmca-{pmca.__version__}-{tag}.whl" in readme


def test_framework_distribution_has_every_part(cli: RunCli, tmp_path: Path):
    result = cli("new", "framework", "wave", "--into", str(tmp_path / "new" / "dir"))
    assert result.code == 0, result.err
    root = tmp_path / "new" / "dir" / "pmca-wave"
    assert files(root) >= {
        "src/pmca_wave/__init__.py",
        "src/pmca_wave/_base.py",
        "src/pmca_wave/basic.py",
        "tests/test_pmca_wave.py",
        "tox.ini",
        "README.md",
    }
    project = (root / "pyproject.toml").read_text()
    assert '[project.entry-points."pmca.frameworks"]\nwave = "pmca_wave:FRAMEWORK"\n' in project
    assert (
        '[project.entry-points."pmca.wave"]\nbasic = "pmca_wave.basic:BasicComponent"\n' in project
    )


def test_into_defaults_to_the_working_directory(
    cli: RunCli, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
):
    monkeypatch.chdir(tmp_path)
    assert cli("new", "framework", "wave").code == 0
    assert (tmp_path / "pmca-wave" / "tox.ini").is_file()


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (("component", "Memory", "x"), "FRAMEWORK 'Memory' is not a valid name"),
        (("component", "my_fw", "x"), "FRAMEWORK 'my_fw' is not a valid name"),
        (("component", "memory", "9lives"), "NAME '9lives' is not a valid name"),
        (("component", "memory", "has-dash"), "NAME 'has-dash' is not a valid name"),
        (("framework", "a_b"), "NAME 'a_b' is not a valid name: it must match [a-z][a-z0-9]*"),
        (("framework", "btl"), "NAME 'btl' is one of pmca's own frameworks"),
        (("component", "nosuchfw", "x"), "FRAMEWORK 'nosuchfw' is not installed here"),
    ],
)
def test_bad_names_are_refused_naming_the_argument(
    cli: RunCli, tmp_path: Path, args: tuple[str, ...], message: str
):
    result = cli("new", *args, "--into", str(tmp_path))
    assert result.code == 2
    assert message in result.err
    assert "Traceback" not in result.err
    assert list(tmp_path.iterdir()) == []


def test_an_existing_directory_is_never_overwritten(cli: RunCli, tmp_path: Path):
    (tmp_path / "pmca-wave").mkdir()
    (tmp_path / "pmca-wave" / "mine.txt").write_text("keep me")
    result = cli("new", "framework", "wave", "--into", str(tmp_path))
    assert result.code == 2
    assert f"{tmp_path / 'pmca-wave'} already exists" in result.err
    assert files(tmp_path / "pmca-wave") == {"mine.txt"}


def test_into_a_file_is_refused(cli: RunCli, tmp_path: Path):
    (tmp_path / "afile").write_text("")
    result = cli("new", "framework", "wave", "--into", str(tmp_path / "afile"))
    assert result.code == 2
    assert "--into" in result.err
    assert "not a directory" in result.err


def test_component_of_a_third_party_framework_depends_on_its_distribution(
    cli: RunCli, tmp_path: Path, install_plugin: InstallPlugin
):
    install_plugin(
        "pmca-tides",
        version="2.1.0",
        entry_points={"pmca.frameworks": {"tides": "pmca_tides_decl:FRAMEWORK"}},
        modules={"pmca_tides_decl": framework_source("tides").replace('"1.0.0"', '"3.2.0"')},
    )
    assert cli("new", "component", "tides", "ebb", "--into", str(tmp_path)).code == 0
    root = tmp_path / "pmca-tides-ebb"
    project = (root / "pyproject.toml").read_text()
    assert f'dependencies = ["pmca>={pmca.__version__}", "pmca-tides>=2.1.0"]' in project
    assert 'api_version = "3.2.0"' in (root / "src" / "pmca_tides_ebb" / "__init__.py").read_text()


# -- the generated distributions under their own tox ------------------------------

#: One scaffold of each kind: a component of a pmca framework, a btl, a new framework.
SCAFFOLDS = {
    "pmca-rcache-tiny": ("component", "rcache", "tiny"),
    "pmca-btl-loop": ("component", "btl", "loop"),
    "pmca-wave": ("framework", "wave"),
}


def installed_from() -> Path | None:
    """The wheel or directory pip installed this pmca from (PEP 610), if it is still there."""
    from importlib.metadata import distribution
    from urllib.parse import unquote, urlparse

    record = json.loads(distribution("pmca").read_text("direct_url.json") or "{}")
    url = urlparse(record.get("url", ""))
    path = Path(unquote(url.path))
    return path if url.scheme == "file" and path.exists() else None


def wheelhouse(tmp_path: Path) -> Path:
    """Everything the generated distributions install except pmca, from the configured index.

    Their tox then runs with pip told to use no index at all, only this directory:
    pmca, which is on no index, must come from where ``pmca new`` recorded.
    """
    from importlib.metadata import requires

    house = tmp_path / "wheelhouse"
    runtime = [r for r in requires("pmca") or [] if "extra ==" not in r]
    wanted = ["setuptools>=77", "wheel", "pytest>=8", *runtime]
    done = subprocess.run(
        [sys.executable, "-m", "pip", "download", "--quiet", "-d", str(house), *wanted],
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    if done.returncode != 0:
        pytest.skip(f"cannot fill a wheelhouse from the package index: {done.stderr[-500:]}")
    return house


def tox_env(house: Path) -> dict[str, str]:
    """This environment without what the outer tox, venv or pytest set, and
    pip limited to ``house``: no index, so no pmca from any index."""
    env = {
        key: value
        for key, value in os.environ.items()
        if not key.startswith(("TOX_", "PMCA_", "PYTEST_", "_PYTEST", "PIP_"))
        and key not in ("VIRTUAL_ENV", "PYTHONPATH", "PYTHONHOME")
    }
    env.update(
        PIP_NO_INDEX="1",
        PIP_INDEX_URL="http://127.0.0.1:9/simple",
        PIP_FIND_LINKS=str(house),
        PIP_DISABLE_PIP_VERSION_CHECK="1",
    )
    return env


def run_tox(root: Path, env: dict[str, str]) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-m", "tox", "run", "-e", "static,dso"],
        cwd=root,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )


@pytest.mark.slow
def test_generated_distributions_pass_their_own_tox_with_pmca_on_no_index(
    cli: RunCli, tmp_path: Path, pmca_load_mode: str
):
    if pmca_load_mode == "dso":
        pytest.skip("the generated tox.ini runs both load modes itself: once per suite run")
    elsewhere = elsewhere_in_matrix()
    if elsewhere is not None:
        pytest.skip(elsewhere)
    pytest.importorskip("tox", reason="tox is in pmca's test extra: pip install 'pmca[test]'")
    source = installed_from()
    if source is None:
        pytest.skip("this pmca was not installed from a wheel or directory that is still there")
    for args in SCAFFOLDS.values():
        assert cli("new", *args, "--into", str(tmp_path)).code == 0
    env = tox_env(wheelhouse(tmp_path))
    # Two builds of one source directory at once would share its build directory.
    at_once = 1 if source.is_dir() else len(SCAFFOLDS)
    names = list(SCAFFOLDS)
    for first in range(0, len(names), at_once):
        runs = {name: run_tox(tmp_path / name, env) for name in names[first : first + at_once]}
        for name, run in runs.items():
            try:
                out, _ = run.communicate(timeout=900)
            except subprocess.TimeoutExpired:
                run.kill()
                out, _ = run.communicate()
                pytest.fail(f"tox of {name} did not finish in 900 s:\n{out[-4000:]}")
            assert run.returncode == 0, f"tox of {name} failed:\n{out[-6000:]}"
            assert "static: OK" in out
            assert "dso: OK" in out
            assert out.count(" passed") >= 2
    # pmca doctor, with the btl installed next to pmca, judges it a working loopback.
    doctor = subprocess.run(
        [str(tmp_path / "pmca-btl-loop" / ".tox" / "static" / "bin" / "pmca"), "doctor", "--quick"],
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert doctor.returncode == 0, doctor.stdout[-4000:] + doctor.stderr[-2000:]
    assert "ok    btl loop  distribution pmca-btl-loop 0.1.0" in doctor.stdout
