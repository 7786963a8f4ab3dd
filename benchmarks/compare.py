"""Print what moved beyond the noise between two benchmark reports.

    python benchmarks/compare.py OLD NEW

``OLD`` and ``NEW`` are report directories written by ``run.py`` (or their
``results.json``), e.g. ``benchmarks/report/20260101T120000Z`` and
``benchmarks/report/latest``.

The noise is what a run's own paired samples show: for each point of each
comparison (a side at a message size or label), the run's paired ratios
against its baseline (each sample over the baseline's sample of the same
round), or its raw samples where the comparison has no baseline. A point
moved when the two runs' ranges, lowest to highest, do not overlap: no
sample of one run lies within the other's spread. Points with fewer than
two samples in either run cannot show noise and are counted, not judged.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import _report

Key = tuple[str, str, str, str]


def load(path: Path) -> dict[str, Any]:
    file = path / _report.RESULTS if path.is_dir() else path
    return dict(json.loads(file.read_text(encoding="utf-8")))


def measured(results: dict[str, Any]) -> Iterator[tuple[Key, list[float], dict[str, Any]]]:
    """``((bench, figure, side, x), values, figure)``: paired ratios, or raw samples."""
    for bench in results.get("benchmarks", []):
        for figure in (bench.get("result") or {}).get("figures", []):
            base = figure.get("baseline")
            if base and base in figure["sides"]:
                for side, x, ratios in _report.ratio_rows(figure):
                    yield (
                        (bench["script"], figure["title"], f"{side} / {base}", str(x)),
                        ratios,
                        figure,
                    )
            else:
                for side in figure["sides"]:
                    for x, samples in _report.points(figure, side):
                        yield (bench["script"], figure["title"], side, str(x)), samples, figure


def moved(old: list[float], new: list[float]) -> bool:
    return max(old) < min(new) or max(new) < min(old)


def main() -> int:
    options = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    options.add_argument("old", type=Path)
    options.add_argument("new", type=Path)
    args = options.parse_args()
    before = {key: (values, figure) for key, values, figure in measured(load(args.old))}
    after = {key: (values, figure) for key, values, figure in measured(load(args.new))}
    common = [key for key in after if key in before]
    changes, steady, unjudged = [], 0, 0
    for key in common:
        (old, figure), (new, _) = before[key], after[key]
        if len(old) < 2 or len(new) < 2:
            unjudged += 1
            continue
        if not moved(old, new):
            steady += 1
            continue
        factor = statistics.median(new) / statistics.median(old)
        # A ratio against a baseline is lower-is-better unless the figure says otherwise.
        better = (factor > 1) == bool(figure.get("higher_is_better"))
        changes.append((key, statistics.median(old), statistics.median(new), factor, better))
    for (bench, title, side, x), old_median, new_median, factor, better in changes:
        print(
            f"{'BETTER' if better else 'WORSE ':6}  {bench}  {title}  [{side} at {x}]  "
            f"{old_median:.4g} -> {new_median:.4g}  (x{factor:.3g})"
        )
    only = len(set(before) ^ set(after))
    print(
        f"{len(changes)} moved beyond the noise, {steady} within it, {unjudged} with too few "
        f"samples to tell, {only} in one report only"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
