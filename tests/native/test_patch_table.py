"""patcher/overwrite's native bookkeeping, with real patches."""

from __future__ import annotations

import ctypes
from collections.abc import Iterator

import pytest

from pmca.patcher import PatchRecord
from pmca.patcher.overwrite._table import PatchTable, library_path


@pytest.fixture
def table() -> Iterator[PatchTable]:
    path = library_path()
    if not path.exists():
        pytest.skip(f"{path.name} was not built")
    patches = PatchTable(ctypes.CDLL(str(path)))
    while patches.pop() is not None:  # the table is process-wide native state
        pass
    yield patches
    while patches.pop() is not None:
        pass


class Site:
    def __init__(self, symbol: str, address: int, original: bytes, patched: bytes) -> None:
        self.symbol = symbol
        self.patch_address = address
        self.original = original
        self.patched = patched


def test_records_keep_application_order_and_exact_bytes(table):
    sites = [
        Site(f"sym{i}", 0x1000 * (i + 1), bytes([i, 0xAA]), b"\xeb" + bytes([i])) for i in range(5)
    ]
    for index, site in enumerate(sites):
        assert table.add(site, owner=f"owner{index}") == index
    assert len(table) == 5
    assert table.records() == [
        PatchRecord(s.symbol, s.patch_address, s.original, s.patched, f"owner{i}")
        for i, s in enumerate(sites)
    ]
    popped = [table.pop() for _ in range(5)]
    assert [r.symbol for r in popped if r] == ["sym4", "sym3", "sym2", "sym1", "sym0"]
    assert table.pop() is None
    assert len(table) == 0


def test_thirty_two_byte_patches_fit_and_longer_ones_do_not(table):
    table.add(Site("wide", 0x4000, bytes(range(32)), bytes(range(32, 64))), owner="o")
    assert table.records()[0].original == bytes(range(32))
    with pytest.raises(ValueError, match="1-32 bytes"):
        table.add(Site("wider", 0x4000, bytes(33), bytes(33)), owner="o")
    with pytest.raises(ValueError, match="same length"):
        table.add(Site("odd", 0x4000, bytes(2), bytes(3)), owner="o")


def test_names_are_bounded(table):
    with pytest.raises(ValueError, match=r"owner 'x+' must be 1-63 bytes without NUL"):
        table.add(Site("munmap", 0x4000, b"ab", b"cd"), owner="x" * 64)
    with pytest.raises(ValueError, match="symbol"):
        table.add(Site("", 0x4000, b"ab", b"cd"), owner="o")
    with pytest.raises(ValueError, match="without NUL"):  # C would read "mun" only
        table.add(Site("mun\0map", 0x4000, b"ab", b"cd"), owner="o")
    with pytest.raises(ValueError, match="a patch must be 1-32 bytes, not 0"):
        table.add(Site("munmap", 0x4000, b"", b""), owner="o")
    assert len(table) == 0
    table.add(Site("m" * 63, 0x4000, b"ab", b"cd"), owner="o" * 63)  # the longest names
    assert table.records()[0].symbol == "m" * 63


def test_a_full_table_says_so(table):
    for index in range(table.capacity):
        table.add(Site("munmap", 0x1000 + index, b"ab", b"cd"), owner="o")
    with pytest.raises(OverflowError, match="full"):
        table.add(Site("munmap", 0x9000, b"ab", b"cd"), owner="o")
    assert len(table) == table.capacity


@pytest.mark.native
def test_restore_all_in_reverse_order_is_byte_exact(table, hooks):
    before = {symbol: hooks.prologue(symbol) for symbol in hooks.symbols}
    for symbol in ("munmap", "mremap", "madvise"):
        table.add(hooks.install(symbol), owner="patcher-overwrite")
    assert [r.symbol for r in table.records()] == ["munmap", "mremap", "madvise"]
    for record in table.records():
        assert ctypes.string_at(record.address, len(record.patched)) == record.patched

    restored = []
    while (record := table.pop()) is not None:
        site = hooks.site(record.symbol)
        assert site is not None and site.original == record.original
        assert hooks.restore(site)
        restored.append(record.symbol)
    assert restored == ["madvise", "mremap", "munmap"]
    assert {symbol: hooks.prologue(symbol) for symbol in hooks.symbols} == before


def test_patching_a_symbol_twice_returns_the_first_patch(run_python) -> None:
    """A second ``patch_symbol`` of a patched symbol is the first patch, once restored.

    With the look-up of the patches already applied skipped, the second call
    patched it again and recorded a second patch (owner "second").
    """
    result = run_python(
        """
        import pmca, pmca.patcher
        with pmca.Session(frameworks=["patcher"]) as session:
            patcher = pmca.patcher.current()
            first = patcher.patch_symbol("shmdt", owner="first")
            again = patcher.patch_symbol("shmdt", owner="second")
            assert (again.owner, again.address) == ("first", first.address), again
            assert [r.symbol for r in patcher.patches()].count("shmdt") == 1
            outcomes = patcher.restore_all()
            assert [o.restored for o in outcomes if o.record.symbol == "shmdt"] == [True]
        print("ok")
        """
    )
    assert result.stdout.strip().endswith("ok"), result
