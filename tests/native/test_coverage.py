"""coverage() and self_test() with real memory: every path, and the documented misses."""

from __future__ import annotations

import pytest

import pmca.native as native

pytestmark = pytest.mark.native

CAUGHT = (
    "free",
    "realloc",
    "malloc_trim",
    "munmap",
    "madvise",
    "mremap",
    "mmap_fixed",
    "shmdt",
    "mmap_close",
    "mmap_madvise",
    "mmap_resize",
    "obmalloc",
    "late_library",
)
EXPECTED_KINDS = {
    "free": {"munmap"},
    "realloc": {"mremap"},
    "malloc_trim": {"madvise", "brk", "munmap", "mmap_fixed"},
    "munmap": {"munmap"},
    "madvise": {"madvise"},
    "mremap": {"mremap"},
    "mmap_fixed": {"mmap_fixed"},
    "shmdt": {"shmdt"},
    "mmap_close": {"munmap"},
    "mmap_madvise": {"madvise"},
    "mmap_resize": {"mremap", "munmap"},
    "obmalloc": {"munmap"},
    "late_library": {"munmap"},
}


@pytest.fixture(scope="module")
def report() -> native.Coverage:
    if not native.available():
        pytest.skip(f"native hook backend unavailable: {native.unavailable_reason()}")
    return native.coverage()


@pytest.mark.parametrize("path", CAUGHT)
def test_release_path_is_caught(report, path):
    result = report[path]
    if result.caught is None:
        pytest.skip(f"{path} cannot run on this machine: {result.note}")
    assert result.caught, f"{path} was missed:\n{report}"
    assert result.outcome == "caught"
    assert set(result.kinds) <= EXPECTED_KINDS[path] | {"overflow"}


@pytest.mark.parametrize("path", ["dlclose", "raw_syscall"])
def test_documented_misses_are_misses(report, path):
    result = report[path]
    assert result.expected is False
    assert result.caught is False, f"{path} unexpectedly caught:\n{report}"
    assert result.outcome == "documented miss"
    assert result.ok


def test_report_is_readable_and_serialisable(report):
    text = str(report)
    for path in (*CAUGHT, "dlclose", "raw_syscall"):
        assert path in text
    assert "documented miss" in text
    data = report.as_dict()
    assert set(data["paths"]) == {*CAUGHT, "dlclose", "raw_syscall"}
    assert data["paths"]["dlclose"]["outcome"] == "documented miss"
    assert set(data["hooks"]) == set(native.backend().symbols)
    assert report.ok and report.missed == ()


def test_coverage_leaves_the_hooks_as_it_found_them(hooks):
    site = hooks.install("munmap")
    states = {symbol: hooks.is_installed(symbol) for symbol in hooks.symbols}
    hooks.set_enabled(False)
    try:
        result = native.coverage()
        assert result.hooks["munmap"] == "installed"
        assert result.hooks["madvise"] == "installed for this run"
        assert {symbol: hooks.is_installed(symbol) for symbol in hooks.symbols} == states
        assert hooks.enabled is False
    finally:
        hooks.set_enabled(True)
        hooks.restore(site)


def test_coverage_does_not_steal_events_from_other_subscribers(hooks):
    seen: list[tuple[int, int, str, bool]] = []
    subscription = native.dispatcher().subscribe(lambda *event: seen.append(event))
    try:
        native.coverage()
        native.dispatcher().drain()
    finally:
        subscription.unregister()
    kinds = {kind for _, _, kind, _ in seen}
    assert {"munmap", "madvise", "mremap", "mmap_fixed", "shmdt"} <= kinds


def test_self_test_passes_for_every_installed_hook(hooks):
    sites = [hooks.install(symbol) for symbol in hooks.symbols]
    try:
        assert native.self_test(hooks.symbols) == dict.fromkeys(hooks.symbols, True)
    finally:
        for site in reversed(sites):
            hooks.restore(site)


def test_self_test_fails_for_hooks_that_are_not_installed(hooks):
    assert native.self_test(["munmap", "brk"]) == {"munmap": False, "brk": False}


def test_self_test_fails_while_hooks_are_disabled(hooks):
    site = hooks.install("munmap")
    hooks.set_enabled(False)
    try:
        assert native.self_test(["munmap"]) == {"munmap": False}
    finally:
        hooks.set_enabled(True)
        hooks.restore(site)
