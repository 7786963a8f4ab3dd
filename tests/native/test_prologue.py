"""Install and restore are byte-exact, and the live patch is the documented one."""

from __future__ import annotations

import ctypes

import pytest

import pmca.native as native

pytestmark = pytest.mark.native

SYMBOLS = ("munmap", "madvise", "mremap", "brk", "shmdt", "mmap")
WINDOW_BEFORE = 64
WINDOW_AFTER = 512


def window(hooks: native.HookBackend, symbol: str) -> tuple[int, bytes]:
    """The function and the padding on both sides of it."""
    start = hooks.address(symbol) - WINDOW_BEFORE
    return start, ctypes.string_at(start, WINDOW_BEFORE + WINDOW_AFTER)


def assert_restored(
    hooks: native.HookBackend, symbol: str, start: int, before: bytes, site: native.PatchSite
) -> None:
    _, after = window(hooks, symbol)
    assert hooks.prologue(symbol) == before[WINDOW_BEFORE : WINDOW_BEFORE + 16]
    slot = site.padding_address - start
    assert 0 <= slot <= len(before) - 5, "padding jump outside the inspected window"
    # Everything is original except the never-executed padding jump, which is
    # deliberately left (a thread may be about to execute it).
    assert after[:slot] == before[:slot]
    assert after[slot + 5 :] == before[slot + 5 :]
    assert after[slot : slot + 5] == site.padding_patched
    # `before` already holds the jump if an earlier test in this process
    # patched the symbol; otherwise it holds what the site recorded.
    assert before[slot : slot + 5] in (site.padding_original, site.padding_patched)
    assert hooks.prologue(symbol, 2)  # still readable, still mapped


@pytest.mark.parametrize("symbol", SYMBOLS)
def test_install_writes_one_short_jump_into_the_entry(hooks, symbol):
    start, before = window(hooks, symbol)
    entry = before[WINDOW_BEFORE : WINDOW_BEFORE + 16]
    site = hooks.install(symbol)

    offset = site.patch_address - site.address
    assert offset in (0, 4)  # 4 = after endbr64
    assert site.original == entry[offset : offset + 2]
    assert site.patched[0] == 0xEB
    now = hooks.prologue(symbol)
    assert now[offset : offset + 2] == site.patched
    assert now[:offset] + now[offset + 2 :] == entry[:offset] + entry[offset + 2 :]

    # The short jump lands on the padding jump, which lands on the trampoline.
    displacement = int.from_bytes(site.patched[1:], "little", signed=True)
    assert site.patch_address + 2 + displacement == site.padding_address
    assert site.padding_patched[0] == 0xE9
    rel32 = int.from_bytes(site.padding_patched[1:], "little", signed=True)
    assert site.padding_address + 5 + rel32 == site.trampoline
    trampoline = ctypes.string_at(site.trampoline, 13)
    assert trampoline[:2] == b"\x49\xbb" and trampoline[10:] == b"\x41\xff\xe3"
    assert int.from_bytes(trampoline[2:10], "little") == site.hook
    assert hooks.is_installed(symbol)
    assert hooks.state(symbol) == "installed"

    assert hooks.restore(site)
    assert not hooks.is_installed(symbol)
    assert hooks.state(symbol) == "idle"
    assert_restored(hooks, symbol, start, before, site)


@pytest.mark.parametrize("symbol", SYMBOLS)
def test_install_and_restore_are_idempotent(hooks, symbol):
    site = hooks.install(symbol)
    assert hooks.install(symbol) == site
    assert hooks.restore(site)
    assert hooks.restore(site)  # already restored: a no-op that reports success
    assert hooks.site(symbol) is None


def test_a_thousand_cycles_leave_every_byte_where_it_was(hooks):
    pristine = {symbol: window(hooks, symbol) for symbol in SYMBOLS}
    first = {symbol: hooks.install(symbol) for symbol in SYMBOLS}
    for site in first.values():
        assert hooks.restore(site)
    after_first = {symbol: window(hooks, symbol)[1] for symbol in SYMBOLS}

    for _ in range(999):
        for symbol in SYMBOLS:
            site = hooks.install(symbol)
            assert site == first[symbol]  # same padding, same trampoline, same bytes
            assert hooks.restore(site)

    for symbol, (start, before) in pristine.items():
        assert window(hooks, symbol)[1] == after_first[symbol]  # no drift at all
        assert_restored(hooks, symbol, start, before, first[symbol])


def test_unknown_symbols_are_rejected(hooks):
    with pytest.raises(ValueError, match="not hookable"):
        hooks.install("free")
    assert hooks.symbols == SYMBOLS


def test_patch_refused_names_symbol_address_bytes_and_reason():
    refused = native.PatchRefused("munmap", 0x7F00, b"\x49\xbb", "an Open MPI patch")
    text = str(refused)
    assert "munmap" in text and "0x7f00" in text and "49 bb" in text
    assert "Open MPI" in text
    assert isinstance(refused, RuntimeError)
