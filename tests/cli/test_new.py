"""``pmca new``: the generator's checks, and generated distributions passing their own tox."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

import pmca
from tests.cli.conftest import RunCli
from tests.conftest import InstallPlugin, framework_source

#: The checkout's root, when the suite runs from one (it has setup.py).
CHECKOUT = Path(__file__).resolve().parents[2]
#: Under tox, generated distributions run their own tox once per matrix, in
#: this environment: the oldest Python pmca supports, which `make test` runs.
SCAFFOLD_TOX_ENV = "py310-static"


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
    assert f"{{env:PMCA_SPEC:pmca>={pmca.__version__}}}" in tox
    for source in root.rglob("*.py"):
        compile(source.read_text(), str(source), "exec")
    assert "PMCA_SPEC" in (root / "README.md").read_text()


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


def pmca_spec(tmp_path: Path) -> str:
    """The pmca the generated distributions test against, without the package index.

    Under tox, the wheel tox built for this run (``TOX_PACKAGE``); otherwise a
    wheel built here from this checkout, once for both distributions (two
    builds of one checkout at once would share its build directory).
    """
    for item in os.environ.get("TOX_PACKAGE", "").split(os.pathsep):
        if Path(item).name.startswith("pmca-") and Path(item).is_file():
            return item
    if not ((CHECKOUT / "setup.py").is_file() and (CHECKOUT / "src" / "pmca").is_dir()):
        pytest.skip("neither a pmca wheel (TOX_PACKAGE) nor a pmca checkout to test against")
    wheels = tmp_path / "wheel"
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "wheel",
            "--quiet",
            "--no-deps",
            "-w",
            str(wheels),
            str(CHECKOUT),
        ],
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    (wheel,) = wheels.glob("pmca-*.whl")
    return str(wheel)


def tox_env(spec: str) -> dict[str, str]:
    """This environment without what the outer tox, venv or pytest set; PMCA_SPEC added."""
    env = {
        key: value
        for key, value in os.environ.items()
        if not key.startswith(("TOX_", "PMCA_", "PYTEST_", "_PYTEST"))
        and key not in ("VIRTUAL_ENV", "PYTHONPATH", "PYTHONHOME")
    }
    env["PMCA_SPEC"] = spec
    return env


@pytest.mark.slow
def test_generated_distributions_pass_their_own_tox_in_both_modes(
    cli: RunCli, tmp_path: Path, pmca_load_mode: str
):
    if pmca_load_mode == "dso":
        pytest.skip("the generated tox.ini runs both load modes itself: once per suite run")
    running_in = os.environ.get("TOX_ENV_NAME")
    if running_in is not None and running_in != SCAFFOLD_TOX_ENV:
        pytest.skip(f"under tox this runs once per matrix, in {SCAFFOLD_TOX_ENV}")
    pytest.importorskip("tox", reason="tox is in pmca's test extra: pip install 'pmca[test]'")
    spec = pmca_spec(tmp_path)
    assert cli("new", "component", "btl", "loop", "--into", str(tmp_path)).code == 0
    assert cli("new", "framework", "wave", "--into", str(tmp_path)).code == 0
    runs = {
        name: subprocess.Popen(
            [sys.executable, "-m", "tox", "run", "-e", "static,dso"],
            cwd=tmp_path / name,
            env=tox_env(spec),
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
        )
        for name in ("pmca-btl-loop", "pmca-wave")
    }
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
        # Every generated test ran in each mode.
        assert out.count(" passed") >= 2
