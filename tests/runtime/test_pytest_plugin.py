"""pmca's pytest plugin, exercised in a real inner pytest run."""

from __future__ import annotations

import pytest

pytest_plugins = ["pytester"]


@pytest.fixture
def pytester(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> pytest.Pytester:
    """The inner run imports the same pmca as this one, installed or not."""
    import os
    from pathlib import Path

    import pmca

    location = str(Path(pmca.__file__).resolve().parent.parent)
    pythonpath = os.environ.get("PYTHONPATH")
    monkeypatch.setenv("PYTHONPATH", location + (os.pathsep + pythonpath if pythonpath else ""))
    return pytester


@pytest.mark.parametrize("mode", ["static", "dso"])
def test_load_mode_option_and_fixtures(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch, mode: str
) -> None:
    pytester.makepyfile(
        """
        import os
        import pmca

        def test_mode(pmca_load_mode, pmca_session):
            assert pmca_load_mode == os.environ["EXPECTED_MODE"]
            info = pmca_session.components("patcher") or [None]
            if info[0] is not None:
                assert info[0].load_mode == pmca_load_mode

        def test_env_isolation(pmca_env):
            os.environ["PMCA_MCA_memory"] = "none"

        def test_env_restored(pmca_env):
            assert "PMCA_MCA_memory" not in os.environ
        """
    )
    monkeypatch.setenv("EXPECTED_MODE", mode)
    result = pytester.runpytest_subprocess(*plugin_args(), f"--pmca-load-mode={mode}")
    result.assert_outcomes(passed=3)
    result.stdout.fnmatch_lines([f"pmca load mode: {mode}"])


def test_nothing_is_autouse(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(
        """
        def test_plain(request):
            assert not any(name.startswith("pmca") for name in request.fixturenames)
        """
    )
    result = pytester.runpytest_subprocess(*plugin_args())
    result.assert_outcomes(passed=1)


def plugin_args() -> list[str]:
    """Load the plugin explicitly unless its pytest11 entry point already does."""
    import importlib.metadata

    installed = any(
        ep.value == "pmca.testing.plugin"
        for ep in importlib.metadata.entry_points(group="pytest11")
    )
    return [] if installed else ["-p", "pmca.testing.plugin"]
