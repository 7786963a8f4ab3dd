"""The entry points kept between starts are used only while the installed metadata is unchanged.

Each start is a fresh interpreter; distributions are really installed and
uninstalled between two starts, with pip, into this environment.
"""

from __future__ import annotations

import itertools
import json
import marshal
import os
import subprocess
import sys
import sysconfig
import zipfile
from pathlib import Path

#: A start: the ``pmca.epcache`` entry points as the session runtime sees them, as JSON.
LIST_GROUP = """
import itertools
import json
from pmca.mca._discovery import EntryPointIndex
print(json.dumps([[p.name, p.value] for p in EntryPointIndex.scan().group("pmca.epcache")]))
"""
#: Moments long before the two seconds a state must have settled for before an answer is kept.
_MOMENTS = itertools.count(1_000_000_000, 1_000_000_000)


def _start(cache: Path, **env: str) -> list[list[str]]:
    """One start in a fresh interpreter, from a directory unchanged for a while (``python -c``
    puts the working directory on ``sys.path``: a recent change there keeps nothing)."""
    here = next(parent for parent in cache.parents if parent.is_dir()) / "cwd"
    if not here.is_dir():
        here.mkdir()
        _settle(here)
    settings = {**os.environ, **env, "PMCA_ENTRY_POINT_CACHE": str(cache)}
    # A failing start raises, its stderr shown by pytest.
    out = subprocess.check_output(
        [sys.executable, "-c", LIST_GROUP], env=settings, cwd=here, text=True, timeout=60
    )
    listed: list[list[str]] = json.loads(out)
    return listed


def _kept_files(cache: Path) -> list[Path]:
    return sorted(cache.glob("entry-points-*.marshal"))


def _wheel(where: Path, name: str, value: str) -> Path:
    """A wheel of distribution ``name``: one module and one ``pmca.epcache`` entry point."""
    module = name.replace("-", "_")
    info = f"{module}-1.0.dist-info"
    wheel = where / f"{module}-1.0-py3-none-any.whl"
    files = {
        f"{module}.py": "class C:\n    pass\n",
        f"{info}/METADATA": f"Metadata-Version: 2.1\nName: {name}\nVersion: 1.0\n",
        f"{info}/WHEEL": (
            "Wheel-Version: 1.0\nGenerator: hand\nRoot-Is-Purelib: true\nTag: py3-none-any\n"
        ),
        f"{info}/entry_points.txt": f"[pmca.epcache]\nwidget = {value}\n",
    }
    record = "".join(f"{path},,\n" for path in files) + f"{info}/RECORD,,\n"
    with zipfile.ZipFile(wheel, "w") as archive:
        for path, text in {**files, f"{info}/RECORD": record}.items():
            archive.writestr(path, text)
    return wheel


def _pip(*args: str) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "pip", "--quiet", "--disable-pip-version-check", *args],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr


def _settle(*paths: Path) -> None:
    """Date ``paths`` back, as if installed a while ago, so that a start keeps its answer
    (each time to another moment: a real clock never shows a directory the same time twice)."""
    moment = next(_MOMENTS)
    for path in paths:
        os.utime(path, ns=(moment, moment))


def test_a_distribution_installed_then_uninstalled_between_starts_is_seen(
    tmp_path: Path, unique
) -> None:
    name = unique("epcache-dist")
    module = name.replace("-", "_")
    site = Path(sysconfig.get_paths()["purelib"])
    assert str(site) in sys.path
    cache = tmp_path / "cache"
    original = os.stat(site)
    try:
        _settle(site)
        assert _start(cache) == []
        assert _kept_files(cache), "nothing was kept: the check below would be blind"

        _pip("install", "--no-deps", "--no-index", str(_wheel(tmp_path, name, f"{module}:C")))
        info = site / f"{module}-1.0.dist-info"
        assert _start(cache) == [["widget", f"{module}:C"]]  # the kept [] no longer holds
        _settle(site, info, info / "entry_points.txt")
        assert _start(cache) == [["widget", f"{module}:C"]]  # now kept with the widget

        _pip("uninstall", "--yes", name)
        assert _start(cache) == []
    finally:
        subprocess.run(
            [sys.executable, "-m", "pip", "uninstall", "--quiet", "--yes", name],
            capture_output=True,
            check=False,
        )
        os.utime(site, ns=(original.st_atime_ns, original.st_mtime_ns))


def test_entry_points_rewritten_in_place_are_read_again(tmp_path: Path, unique) -> None:
    """``setup.py egg_info`` rewrites ``entry_points.txt`` in place: its directory's time stays."""
    root = tmp_path / "site"
    info = root / f"{unique('inplace')}-1.0.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: inplace\nVersion: 1.0\n")
    points = info / "entry_points.txt"
    points.write_text("[pmca.epcache]\nwidget = first:C\n")
    _settle(root, info, points)
    cache = tmp_path / "cache"
    assert _start(cache, PYTHONPATH=str(root)) == [["widget", "first:C"]]
    assert _kept_files(cache)
    with open(points, "r+") as file:  # same inode, same size, same directory
        file.write("[pmca.epcache]\nwidget = other:C\n")
    assert _start(cache, PYTHONPATH=str(root)) == [["widget", "other:C"]]


def test_a_start_answers_from_the_kept_entry_points(tmp_path: Path) -> None:
    """The kept answer is what a start lists while nothing changed (here, altered on purpose)."""
    cache = tmp_path / "cache"
    _start(cache)
    (kept,) = _kept_files(cache)
    with open(kept, "rb") as file:
        key, rows, points = marshal.load(file)
    dist_path = rows[0][0]
    points = (*points, ("planted", "planted_module:C", "pmca.epcache", dist_path))
    with open(kept, "wb") as file:
        marshal.dump((key, rows, points), file)
    assert _start(cache) == [["planted", "planted_module:C"]]


def test_a_cache_that_cannot_be_written_is_no_cache(tmp_path: Path) -> None:
    blocked = tmp_path / "a-file"
    blocked.write_text("not a directory")
    assert _start(blocked / "pmca") == []
    assert blocked.read_text() == "not a directory"
