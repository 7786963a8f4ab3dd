"""Fixtures for the memory framework tests: real hooks, real sessions, throwaway plugins."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

import pmca.native as native
from pmca.memory.patcher._module import SYMBOLS
from pmca.runtime import RUNTIME
from tests.conftest import InstallFramework, component_source
from tests.native.conftest import run_python  # noqa: F401  (fixture: fresh processes)


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    if native.available():
        return
    skip = pytest.mark.skip(
        reason=f"native hook backend unavailable: {native.unavailable_reason()}"
    )
    here = Path(__file__).parent
    for item in items:
        if here in item.path.parents:
            item.add_marker(skip)


def hooks_live() -> bool:
    """Whether every release path memory/patcher hooks really jumps to pmca (libc's bytes)."""
    backend = native.backend()
    return all(backend.is_installed(symbol) for symbol in SYMBOLS)


def hooks_gone() -> bool:
    """Whether no release path is patched any more."""
    backend = native.backend()
    return not any(backend.is_installed(symbol) for symbol in SYMBOLS)


@pytest.fixture(autouse=True)
def _clean_hooks(pmca_env: dict[str, str]) -> Iterator[None]:
    """Every memory test starts and ends with libc unpatched and nobody subscribed."""
    assert hooks_gone(), "an earlier test left libc patched"
    yield
    assert RUNTIME.sessions == 0, "a test leaked a live session"
    assert hooks_gone(), "libc still patched after the last finalize"
    assert native.dispatcher().subscriber_count == 0, "a release callback outlived its session"


def _registering_plugin(
    install_framework: InstallFramework, unique: Callable[[str], str], *, needs: bool
) -> str:
    name = unique("regfw")
    source = component_source(name, "pinned") + f"\nTestComponent.needs_registration = {needs!r}\n"
    install_framework(name, {"pinned": source})
    return name


@pytest.fixture
def registering_framework(install_framework: InstallFramework, unique: Callable[[str], str]) -> str:
    """A throwaway framework whose only component declares ``needs_registration``."""
    return _registering_plugin(install_framework, unique, needs=True)


@pytest.fixture
def plain_framework(install_framework: InstallFramework, unique: Callable[[str], str]) -> str:
    """A throwaway framework whose only component does not need registration."""
    return _registering_plugin(install_framework, unique, needs=False)
