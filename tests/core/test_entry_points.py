"""pmca's own entry-point reader lists what importlib_metadata lists, or steps aside."""

from __future__ import annotations

import sys
import zipfile

import importlib_metadata
import pytest

from pmca.mca._discovery import EntryPointIndex, distribution_label
from pmca.mca._entrypoints import read_entry_points
from pmca.testing import make_distribution


def _listed(points) -> list[tuple[str, str, str]]:
    return [(ep.group, ep.name, ep.value) for ep in points]


def _reference(prefix: str) -> list[tuple[str, str, str]]:
    return _listed(ep for ep in importlib_metadata.entry_points() if ep.group.startswith(prefix))


@pytest.fixture
def two_sites(tmp_path, monkeypatch):
    first, second = tmp_path / "first", tmp_path / "second"
    make_distribution(first, "dup-dist", entry_points={"pmca.epfw": {"a": "dup_first:C"}})
    make_distribution(
        second,
        "Dup.Dist",
        version="2.0",
        entry_points={"pmca.epfw": {"shadowed": "dup_second:C"}},
    )
    make_distribution(
        second,
        "other-dist",
        entry_points={"pmca.epfw": {"b": "other:C [extra]"}, "console_scripts": {"x": "y:z"}},
    )
    # No METADATA: importlib_metadata lists it after every distribution that has one.
    bare = make_distribution(first, "bare-dist", entry_points={"pmca.epfw": {"c": "bare:C"}})
    (bare / "METADATA").unlink()
    # A second copy of the same name in the same directory, with metadata: it wins.
    make_distribution(
        second, "bare-dist", version="9", entry_points={"pmca.epfw": {"d": "bare9:C"}}
    )
    comments = make_distribution(second, "commented", entry_points={})
    (comments / "entry_points.txt").write_text(
        "# a comment\n\n[pmca.epfw]\n  e =  spaced.mod : Attr.Inner \n[not.pmca]\nf = g\n"
    )
    for root in (second, first):
        monkeypatch.syspath_prepend(str(root))
    return first, second


def test_the_reader_lists_what_importlib_metadata_lists(two_sites) -> None:
    ours = read_entry_points("pmca.")
    assert ours is not None
    assert _listed(ours) == _reference("pmca.")
    names = [ep.name for ep in ours if ep.group == "pmca.epfw"]
    # Of the two bare-dist copies, importlib_metadata 10.1 on keeps the one with
    # metadata; older ones (9.x, on Python 3.10) the first on the path.
    release = importlib_metadata.version("importlib_metadata").split(".")[:2]
    kept, dropped = ("d", "c") if tuple(map(int, release)) >= (10, 1) else ("c", "d")
    assert "shadowed" not in names and "a" in names and kept in names and dropped not in names
    spaced = next(ep for ep in ours if ep.name == "e")
    assert spaced.value == "spaced.mod : Attr.Inner"


def test_every_installed_entry_point_is_listed_in_the_same_order() -> None:
    ours = read_entry_points("")
    assert ours is not None
    assert _listed(ours) == _listed(importlib_metadata.entry_points())


def test_entry_points_load_and_name_their_distribution(tmp_path, monkeypatch) -> None:
    root = tmp_path / "site"
    make_distribution(
        root,
        "Loadable-Dist",
        version="3.1",
        entry_points={"pmca.epload": {"obj": "ep_loadable:Holder.VALUE", "mod": "ep_loadable"}},
        modules={"ep_loadable": "class Holder:\n    VALUE = 42\n"},
    )
    monkeypatch.syspath_prepend(str(root))
    points = {ep.name: ep for ep in read_entry_points("pmca.epload") or []}
    assert points["obj"].load() == 42
    assert points["mod"].load() is sys.modules["ep_loadable"]
    assert distribution_label(points["obj"]) == "Loadable-Dist 3.1"
    del sys.modules["ep_loadable"]


def test_a_malformed_reference_fails_when_loaded_naming_it(tmp_path, monkeypatch) -> None:
    root = tmp_path / "site"
    make_distribution(root, "bad-ref", entry_points={"pmca.epbad": {"x": "not a reference!"}})
    monkeypatch.syspath_prepend(str(root))
    (point,) = read_entry_points("pmca.epbad") or []
    with pytest.raises(ValueError, match="not a reference!"):
        point.load()


def test_a_zip_on_the_path_is_left_to_importlib_metadata(tmp_path, monkeypatch) -> None:
    archive = tmp_path / "plugins.zip"
    with zipfile.ZipFile(archive, "w") as zipped:
        zipped.writestr("zipped_dist-1.0.dist-info/METADATA", "Name: zipped-dist\nVersion: 1.0\n")
        zipped.writestr("zipped_dist-1.0.dist-info/entry_points.txt", "[pmca.epzip]\nz = zm:C\n")
    monkeypatch.syspath_prepend(str(archive))
    assert read_entry_points("pmca.") is None
    # The index still finds it, through importlib_metadata.
    assert [ep.name for ep in EntryPointIndex.scan().group("pmca.epzip")] == ["z"]


def test_a_foreign_distribution_finder_is_left_to_importlib_metadata(monkeypatch) -> None:
    class Finder:
        @staticmethod
        def find_spec(*args):
            return None

        @staticmethod
        def find_distributions(context=None):
            return iter(())

    monkeypatch.setattr(sys, "meta_path", [*sys.meta_path, Finder()])
    assert read_entry_points("pmca.") is None
