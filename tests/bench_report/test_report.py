"""make bench's report: plots that open as images, links that resolve, paired ratios, compare.py.

The results are synthetic (what benchmarks emit through ``Report.figure``
and ``Report.size_figures``), so the tests know every ratio to expect.
"""

from __future__ import annotations

import json
import re
import struct
import subprocess
import sys
from pathlib import Path

import pytest

BENCH_DIR = Path(__file__).resolve().parents[2] / "benchmarks"
PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"
SIZES = [1024, 16384, 1 << 20]


@pytest.fixture
def bench(monkeypatch):
    """The benchmarks' own modules, imported as ``run.py`` imports them."""
    monkeypatch.syspath_prepend(str(BENCH_DIR))
    import _common
    import _report
    import run

    return _common, _report, run


def _pingpong_jobs(bandwidth: float, latency: float, jobs: int = 4) -> list[dict]:
    """What a ping-pong job reports, with a small spread from job to job."""
    return [
        {
            "latency_us": latency * (1 + 0.01 * job),
            "bandwidth": {str(size): bandwidth * (1 + 0.01 * job) for size in SIZES},
        }
        for job in range(jobs)
    ]


def _result(common, *, pmca_bandwidth: float = 500.0) -> dict:
    report = common.Report("btl_sm")
    runs = {
        "mpi4py": _pingpong_jobs(1000.0, 1.0),
        "pmca": _pingpong_jobs(pmca_bandwidth, 2.0),
    }
    report.size_figures("btl sm vs Open MPI sm (mpi4py)", runs, baseline="mpi4py")
    report.figure(
        "hook overhead, per-event subscriber, cpu time",
        {
            "hooked": {"mmap+munmap 4 KiB (C)": [1.1, 1.2, 1.1], "malloc/free": [0.5, 0.6, 0.5]},
            "plain": {"mmap+munmap 4 KiB (C)": [1.0, 1.0, 1.0], "malloc/free": [0.5, 0.5, 0.5]},
        },
        unit="s",
        baseline="plain",
    )
    report.figure(
        "rcache: invalidate cost against registrations hit",
        {"pmca": {1: [1e-6, 1.1e-6], 10: [2e-6, 2.1e-6], 100: [9e-6, 9.5e-6]}},
        unit="s",
        x_label="registrations hit",
        log_x=True,
    )
    report.ratios["sm latency 8 B (pmca / mpi4py)"] = 2.0
    report.goals.append(common.Goal("sm latency 8 B, pmca / mpi4py", 2.0, 5.0, "x"))
    return {
        "bench": report.bench,
        "ratios": report.ratios,
        "goals": [{**vars(g), "met": g.met} for g in report.goals],
        "notes": ["synthetic"],
        "figures": report.figures,
    }


def _write_report(run, directory: Path, result: dict | None) -> Path:
    outcome = run.Outcome("bench_btl_sm.py", 0, 12.5, result, started=0.0, output=["text"])
    with run.LoadSampler(interval=0.05) as load:
        pass
    return run.write_report(directory, [outcome], load, started=0.0, quick=True)


def _png_size(path: Path) -> tuple[int, int]:
    data = path.read_bytes()
    assert data[:8] == PNG_SIGNATURE, f"{path.name} is not a PNG"
    assert data[12:16] == b"IHDR"
    return struct.unpack(">II", data[16:24])


def test_report_plots_open_as_images_and_links_resolve(bench, tmp_path):
    pytest.importorskip("matplotlib", reason="the report's plots need pmca[bench]")
    import matplotlib.image
    import numpy

    common, _report, run = bench
    markdown = _write_report(run, tmp_path / "20260101T000000Z", _result(common))
    text = markdown.read_text()
    links = re.findall(r"!\[[^\]]*\]\(([^)]+)\)", text)
    # bandwidth, half round trip, hook overhead, invalidate: one plot each
    assert len(links) == 4, text
    for link in links:
        png = markdown.parent / link
        assert png.is_file(), f"{link} does not resolve"
        width, height = _png_size(png)
        assert width >= 400 and height >= 300
        pixels = matplotlib.image.imread(png)
        assert pixels.shape[:2] == (height, width)
        # Not a blank canvas: the curves, bars and text give many distinct colours.
        colours = numpy.unique(pixels.reshape(-1, pixels.shape[-1]), axis=0)
        assert len(colours) > 20, f"{link} looks empty ({len(colours)} colours)"
    assert "load average (1 min)" in text


def test_report_tables_give_paired_ratios(bench, tmp_path):
    common, _report, run = bench
    markdown = _write_report(run, tmp_path / "run", _result(common))
    text = markdown.read_text()
    # pmca's bandwidth is half of mpi4py's in every round: every paired ratio is 0.5.
    assert "| pmca | 1048576 | 0.5 | 0.5 to 0.5 | 4 |" in text, text
    # Half round trip of 1 MiB: 1 MiB / bandwidth, so twice mpi4py's.
    assert "| pmca | 1048576 | 2 | 2 to 2 | 4 |" in text
    # The 8-byte point comes from latency_us: 2 µs against 1 µs.
    assert "| pmca | 8 | 2 | 2 to 2 | 4 |" in text
    assert "| hooked | mmap+munmap 4 KiB (C) | 1.1 | 1.1 to 1.2 | 3 |" in text
    assert "No baseline in this comparison" in text
    assert "| sm latency 8 B, pmca / mpi4py | 2x | <= 5x | PASS |" in text
    saved = json.loads((markdown.parent / "results.json").read_text())
    figures = saved["benchmarks"][0]["result"]["figures"]
    assert figures[0]["sides"]["pmca"]["samples"][0] == [500.0, 505.0, 510.0, 515.0]


def test_previous_report_is_kept_and_latest_points_at_the_newest(bench, tmp_path):
    _, _, run = bench
    first = _write_report(run, tmp_path / "20260101T000000Z", None)
    second = _write_report(run, tmp_path / "20260102T000000Z", None)
    assert first.is_file() and second.is_file()
    assert (tmp_path / "latest").resolve() == second.parent.resolve()


def test_compare_prints_only_what_moved_beyond_the_noise(bench, tmp_path):
    common, _report, _ = bench
    for name, bandwidth in (("old", 500.0), ("new", 800.0), ("same", 500.0)):
        # Every bandwidth pair of "new" moves from 0.5 to 0.8: far outside one run's spread.
        results = {
            "benchmarks": [
                {"script": "bench_btl_sm.py", "result": _result(common, pmca_bandwidth=bandwidth)}
            ]
        }
        (tmp_path / name).mkdir()
        (tmp_path / name / _report.RESULTS).write_text(json.dumps(results))

    def compare(old: str, new: str) -> str:
        done = subprocess.run(
            [
                sys.executable,
                str(BENCH_DIR / "compare.py"),
                str(tmp_path / old),
                str(tmp_path / new),
            ],
            capture_output=True,
            text=True,
            timeout=120,
            check=True,
        )
        return done.stdout

    moved = compare("old", "new")
    lines = [line for line in moved.splitlines() if line.startswith(("BETTER", "WORSE"))]
    # 3 sizes of bandwidth (better) and 3 of the half round trip (better, lower)
    assert len(lines) == 6, moved
    assert all(line.startswith("BETTER") for line in lines), moved
    assert "[pmca / mpi4py at 1048576]  0.5 -> 0.8" in moved
    assert "6 moved beyond the noise" in moved
    unchanged = compare("old", "same")
    assert "0 moved beyond the noise" in unchanged, unchanged
