"""The report ``run.py`` leaves behind: ``results.json``, one PNG per comparison, ``report.md``.

``results.json`` holds what every benchmark emitted (ratios, goals, notes
and, per comparison, every raw sample: see ``_common.Report.figure``) and
the machine's load while it ran. :func:`render` draws it; plotting needs
matplotlib (``pip install 'pmca[bench]'``). Without it the report is
written with its tables and says which plots are missing.

Paired ratios: samples with the same index on two sides were measured in
the same round (ABBA order), so each side's sample is divided by the
baseline's sample of its round; the table gives their median and range.
"""

from __future__ import annotations

import json
import math
import re
import statistics
import textwrap
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

RESULTS = "results.json"
MARKDOWN = "report.md"


def figure_record(
    title: str,
    sides: Mapping[str, Mapping[Any, Sequence[float]]],
    *,
    unit: str,
    x_label: str = "",
    baseline: str | None = None,
    higher_is_better: bool = False,
    log_x: bool = False,
    log_y: bool = False,
) -> dict[str, Any]:
    """One comparison as ``results.json`` keeps it: per side, the x values and their samples."""
    return {
        "title": title,
        "unit": unit,
        "x_label": x_label,
        "baseline": baseline,
        "higher_is_better": higher_is_better,
        "log_x": log_x,
        "log_y": log_y,
        "sides": {
            side: {"x": list(by_x), "samples": [list(map(float, v)) for v in by_x.values()]}
            for side, by_x in sides.items()
        },
    }


def pingpong_records(
    label: str,
    runs: Mapping[str, Sequence[Mapping[str, Any]]],
    *,
    baseline: str | None,
    latency_bytes: int = 8,
) -> list[dict[str, Any]]:
    """Bandwidth and half round trip against message size, from ping-pong jobs' replies."""
    bandwidth: dict[str, dict[int, list[float]]] = {}
    latency: dict[str, dict[int, list[float]]] = {}
    for side, jobs in runs.items():
        if not jobs:
            continue
        sizes = sorted(int(size) for size in jobs[0]["bandwidth"])
        bandwidth[side] = {n: [job["bandwidth"][str(n)] for job in jobs] for n in sizes}
        latency[side] = {latency_bytes: [job["latency_us"] for job in jobs]}
        for n in sizes:
            latency[side][n] = [n / job["bandwidth"][str(n)] for job in jobs]
    base = baseline if baseline in bandwidth else None
    axes: dict[str, Any] = {"x_label": "message size (bytes)", "log_x": True, "log_y": True}
    return [
        figure_record(
            f"{label}: bandwidth",
            bandwidth,
            unit="MB/s",
            baseline=base,
            higher_is_better=True,
            **axes,
        ),
        figure_record(f"{label}: half round trip", latency, unit="µs", baseline=base, **axes),
    ]


def paired(samples: Sequence[float], baseline: Sequence[float]) -> list[float]:
    """Each sample over the baseline sample of its round (rounds measured on both sides only)."""
    return [s / b for s, b in zip(samples, baseline, strict=False) if b > 0 and s == s and b == b]


def points(figure: dict[str, Any], side: str) -> Iterator[tuple[Any, list[float]]]:
    data = figure["sides"][side]
    yield from zip(data["x"], data["samples"], strict=True)


def ratio_rows(figure: dict[str, Any]) -> Iterator[tuple[str, Any, list[float]]]:
    """``(side, x, paired ratios against the baseline)`` for every side but the baseline."""
    base_name = figure.get("baseline")
    if not base_name or base_name not in figure["sides"]:
        return
    base = dict(points(figure, base_name))
    for side in figure["sides"]:
        if side == base_name:
            continue
        for x, samples in points(figure, side):
            if x in base:
                yield side, x, paired(samples, base[x])


def slug(*parts: str) -> str:
    text = "-".join(parts).lower()
    return re.sub(r"[^a-z0-9]+", "-", text).strip("-")[:90]


def _numeric(figure: dict[str, Any]) -> bool:
    return all(isinstance(x, (int, float)) for side in figure["sides"].values() for x in side["x"])


def draw(figure: dict[str, Any], path: Path) -> None:
    """One PNG: lines against a numeric x (median, min-max band), else grouped bars."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(9, 5.5), dpi=100)
    sides = list(figure["sides"])
    if _numeric(figure):
        for side in sides:
            xs, medians, lows, highs = [], [], [], []
            for x, samples in sorted(points(figure, side)):
                if samples:
                    xs.append(x)
                    medians.append(statistics.median(samples))
                    lows.append(min(samples))
                    highs.append(max(samples))
            (line,) = ax.plot(xs, medians, marker="o", label=side)
            ax.fill_between(xs, lows, highs, alpha=0.2, color=line.get_color())
        ax.set_xlabel(figure.get("x_label") or "")
    else:
        labels: list[str] = []
        for side in sides:
            for x in figure["sides"][side]["x"]:
                if x not in labels:
                    labels.append(x)
        width = 0.8 / max(len(sides), 1)
        for index, side in enumerate(sides):
            values = dict(points(figure, side))
            legend: str | None = side  # on the first bar of the side only
            for position, label in enumerate(labels):
                samples = values.get(label) or []
                if not samples:
                    continue
                where = position - 0.4 + width * (index + 0.5)
                median = statistics.median(samples)
                ax.bar(where, median, width, color=f"C{index}", label=legend)
                legend = None
                ax.plot([where] * len(samples), samples, ".", color="black", markersize=3)
        ax.set_xticks(range(len(labels)))
        ax.set_xticklabels([textwrap.fill(str(label), 22) for label in labels], fontsize=7)
        medians = [statistics.median(s) for side in sides for _, s in points(figure, side) if s]
        if medians and min(medians) > 0 and max(medians) / min(medians) > 50:
            ax.set_yscale("log")
    if figure.get("log_x"):
        ax.set_xscale("log", base=2)
    if figure.get("log_y"):
        ax.set_yscale("log")
    better = "higher" if figure.get("higher_is_better") else "lower"
    ax.set_ylabel(f"{figure['unit']} ({better} is better)")
    ax.set_title(textwrap.fill(figure["title"], 80), fontsize=10)
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)


def _plotting() -> str | None:
    """Why plots cannot be drawn here, or None."""
    try:
        import matplotlib  # noqa: F401
    except ImportError:
        return "matplotlib is not installed (pip install 'pmca[bench]'): no plots drawn"
    return None


def _format(value: float) -> str:
    return f"{value:.3g}" if math.isfinite(value) else "n/a"


def _load_line(load: dict[str, Any] | None) -> str:
    if not load or not load.get("samples"):
        return "load average (1 min) not sampled"
    samples = load["samples"]
    return (
        f"load average (1 min) {min(samples):.2f} to {max(samples):.2f}, "
        f"median {statistics.median(samples):.2f}, {len(samples)} samples "
        f"on {load.get('cpus', '?')} CPUs"
    )


def _figure_section(figure: dict[str, Any], png: str | None) -> list[str]:
    lines = [f"#### {figure['title']}", ""]
    if png is not None:
        lines += [f"![{figure['title']}]({png})", ""]
    rows = list(ratio_rows(figure))
    if rows:
        base = figure["baseline"]
        lines += [
            f"| side | x | paired ratio side / {base} (median) | range | pairs |",
            "|---|---|---|---|---|",
        ]
        for side, x, ratios in rows:
            if ratios:
                spread = f"{_format(min(ratios))} to {_format(max(ratios))}"
                median = _format(statistics.median(ratios))
            else:
                spread, median = "no pairs", "n/a"
            lines.append(f"| {side} | {x} | {median} | {spread} | {len(ratios)} |")
        lines.append("")
    else:
        lines += ["No baseline in this comparison: medians only.", ""]
    return lines


def render(directory: Path) -> Path:
    """Draw every figure of ``directory/results.json`` and write ``report.md``; return its path."""
    results = json.loads((directory / RESULTS).read_text(encoding="utf-8"))
    missing = _plotting()
    lines = [
        "# pmca benchmark report",
        "",
        f"- started {results.get('started', '?')}, finished {results.get('finished', '?')}"
        + (" (quick run)" if results.get("quick") else ""),
        f"- {results.get('python', '')} on {results.get('platform', '')}",
        f"- machine load during the whole run: {_load_line(results.get('load'))}",
        "- ratios are paired: each sample over the baseline's sample of the same round",
        "",
    ]
    if missing:
        lines += [f"> {missing}", ""]
    for bench in results.get("benchmarks", []):
        status = "ok" if bench.get("returncode") == 0 else f"exit {bench.get('returncode')}"
        lines += [
            f"## {bench['script']}",
            "",
            f"{status}, {bench.get('seconds', 0):.1f} s; {_load_line(bench.get('load'))}",
            "",
        ]
        result = bench.get("result") or {}
        goals = result.get("goals", [])
        if goals:
            lines += ["| goal | value | limit | verdict |", "|---|---|---|---|"]
            for goal in goals:
                verdict = "PASS" if goal["met"] else "MISS"
                unit = goal.get("unit", "")
                bound = ">=" if goal.get("at_least") else "<="
                lines.append(
                    f"| {goal['name']} | {_format(goal['value'])}{unit} | "
                    f"{bound} {goal['limit']:g}{unit} | {verdict} |"
                )
            lines.append("")
        for figure in result.get("figures", []):
            png = None
            if missing is None:
                png = f"{slug(bench['script'].removesuffix('.py'), figure['title'])}.png"
                draw(figure, directory / png)
            lines += _figure_section(figure, png)
        ratios = result.get("ratios", {})
        if ratios:
            lines += ["| ratio | value |", "|---|---|"]
            lines += [f"| {name} | {_format(value)} |" for name, value in ratios.items()]
            lines.append("")
        lines += [f"- note: {note}" for note in result.get("notes", [])]
        lines.append("")
    path = directory / MARKDOWN
    path.write_text("\n".join(lines), encoding="utf-8")
    return path
