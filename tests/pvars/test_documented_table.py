"""The documentation's table of pvars names each pvar with the class ``pmca info --pvars`` gives.

The table lives in the README or on the documentation site: every Markdown
table whose first header is ``pvars`` is checked, wherever it is.
"""

from __future__ import annotations

import itertools
import json
import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
_TOKEN = re.compile(r"`([^`]+)`(?:\s*\(([A-Z]+)[,)])?")


def _tables() -> list[tuple[str, str]]:
    """``(where, first cell)`` of every row of every pvar table in the docs."""
    rows: list[tuple[str, str]] = []
    for page in [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]:
        in_table = False
        for number, line in enumerate(page.read_text().splitlines(), 1):
            if line.startswith("| pvars |"):
                in_table = True
            elif in_table and line.startswith("| `"):
                rows.append((f"{page.relative_to(ROOT)}:{number}", line.split(" | ")[0][2:]))
            elif not line.startswith("|"):
                in_table = False
    return rows


def _expand(pattern: str) -> list[str]:
    parts = re.split(r"\{([^}]*)\}", pattern)
    choices = [[p] if i % 2 == 0 else p.split(",") for i, p in enumerate(parts)]
    return ["".join(combo) for combo in itertools.product(*choices)]


def _documented(cell: str) -> list[tuple[list[str], str | None]]:
    """Each name pattern of a cell (``_suffix`` after the one before it) and its class."""
    found: list[tuple[list[str], str | None]] = []
    prefixes: list[str] = []
    for pattern, klass in _TOKEN.findall(cell):
        if pattern.startswith("_"):
            names = [p + pattern for p in prefixes]
        else:
            names = _expand(pattern)
            prefixes = sorted({"_".join(n.split("_")[:2]) for n in names})
        found.append((names, klass or None))
    return found


def test_the_pvar_tables_agree_with_pmca_info() -> None:
    listing = subprocess.run(
        [sys.executable, "-m", "pmca", "info", "--pvars", "--json"],
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    ).stdout
    classes = {p["name"]: p["class"].upper() for p in json.loads(listing)["pvars"]}
    rows = _tables()
    assert rows, "no pvar table found in README.md or docs/"
    for where, cell in rows:
        documented = _documented(cell)
        given = {klass is not None for _, klass in documented}
        # "`a` (LEVEL), `_b`, `_c` (STATE)": is `_b` a counter or a state? Say it.
        assert len(given) == 1, f"{where}: give every pvar of the row its class, or none: {cell}"
        for names, klass in documented:
            for name in names:
                pattern = re.compile(re.escape(name).replace(re.escape("<c>"), "[a-z0-9]+"))
                matches = [n for n in classes if pattern.fullmatch(n)]
                assert matches, f"{where}: {name} is not a pvar pmca info --pvars lists"
                for match in matches:
                    assert classes[match] == (klass or "COUNTER"), f"{where}: {match}"
