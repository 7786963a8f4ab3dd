"""Fixtures for the native hook backend tests: real libc, real memory, real processes."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

import pmca.native as native


def pytest_runtest_setup(item: pytest.Item) -> None:
    if item.get_closest_marker("native") and not native.available():
        pytest.skip(f"native hook backend unavailable: {native.unavailable_reason()}")


@pytest.fixture
def hooks() -> Iterator[native.HookBackend]:
    """The backend; whatever the test installs is restored, and the state checked."""
    backend = native.backend()
    installed_before = {symbol: backend.is_installed(symbol) for symbol in backend.symbols}
    yield backend
    backend.set_enabled(True)
    for symbol in backend.symbols:
        site = backend.site(symbol)
        if site is not None and not installed_before[symbol]:
            assert backend.restore(site), f"{symbol} could not be restored"
    assert native.dispatcher().subscriber_count == 0, "a test leaked a subscription"


# Every subprocess starts multi-threaded: glibc only takes its arena locks
# once a second thread has existed, and the deadlocks we guard against need
# those locks.
_PRELUDE = """
import threading
_t = threading.Thread(target=lambda: None)
_t.start()
_t.join()
"""

RunPython = Callable[..., subprocess.CompletedProcess[str]]


@pytest.fixture
def run_python() -> RunPython:
    """Run code in a fresh interpreter (multi-threaded first) and require success."""
    package_root = Path(native.__file__).resolve().parents[2]
    base_env = dict(os.environ)
    base_env["PYTHONPATH"] = os.pathsep.join(
        filter(None, [str(package_root), base_env.get("PYTHONPATH", "")])
    )

    def run(
        code: str, timeout: float = 60.0, check: bool = True, env: dict[str, str] | None = None
    ) -> subprocess.CompletedProcess[str]:
        source = _PRELUDE + textwrap.dedent(code)
        try:
            result = subprocess.run(
                [sys.executable, "-c", source],
                capture_output=True,
                text=True,
                timeout=timeout,
                env={**base_env, **(env or {})},
            )
        except subprocess.TimeoutExpired as exc:
            pytest.fail(
                f"subprocess hung (>{timeout}s); output so far:\n{exc.stdout}\n{exc.stderr}"
            )
        if check and result.returncode != 0:
            pytest.fail(
                f"subprocess exited with {result.returncode}\n"
                f"--- stdout\n{result.stdout}\n--- stderr\n{result.stderr}"
            )
        return result

    return run
