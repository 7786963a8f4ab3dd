"""Fixtures for the seed-scenario tests: skips with reasons, and child runs."""

from __future__ import annotations

import subprocess
from collections.abc import Callable
from typing import Any

import pytest

import pmca
from pmca.scenarios._13021_child import parse
from pmca.scenarios.ompi_13021 import REPRODUCTION_DISTRIBUTION, Variant, plugin_installed
from pmca.testing import run_python

#: Runs child code for one variant: (completed process, its records).
RunVariant = Callable[..., tuple[subprocess.CompletedProcess[str], list[dict[str, Any]]]]


@pytest.fixture
def native_backend() -> pmca.native.HookBackend:
    """The native hook backend, or a skip saying why it cannot be used here."""
    reason = pmca.native.unavailable_reason()
    if reason is not None:
        pytest.skip(f"native hook backend unavailable: {reason}")
    return pmca.native.backend()


@pytest.fixture
def reproduction_plugin(native_backend: pmca.native.HookBackend) -> str:
    """The reproduction component's name, or a skip when its plugin is not installed."""
    if not plugin_installed():
        pytest.skip(
            f"{REPRODUCTION_DISTRIBUTION} is not installed; "
            f"pip install --no-deps plugins/{REPRODUCTION_DISTRIBUTION}"
        )
    return "ompi13021"


@pytest.fixture
def run_variant_child(native_backend: pmca.native.HookBackend) -> RunVariant:
    """Run ``code`` in a fresh, multi-threaded interpreter set up for one variant."""

    def run(
        component: str,
        mode: str,
        code: str = "from pmca.scenarios._13021_child import main\nmain()\n",
        *,
        timeout: float = 120.0,
        env: dict[str, str] | None = None,
    ) -> tuple[subprocess.CompletedProcess[str], list[dict[str, Any]]]:
        variant_env = Variant(component, mode).env  # type: ignore[arg-type]
        child = run_python(code, timeout=timeout, env={**variant_env, **(env or {})})
        return child, parse(child.stdout)

    return run
