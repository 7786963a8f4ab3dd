"""The ompi-13021 scenario runner, its classification, and the example."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

import pmca
from pmca.scenarios import ScenarioResult
from pmca.scenarios.ompi_13021 import (
    SCENARIO,
    VARIANTS,
    Variant,
    classify,
    ofi_unavailable,
    run_matrix,
    run_variant,
)

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "ompi_13021.py"
CLAIMED = int(pmca.memory.FREE | pmca.memory.MUNMAP)


def test_run_matrix_gives_the_expected_outcomes(reproduction_plugin: str) -> None:
    results = run_matrix(timeout=120)
    ofi = [
        ("reproduction plugin, static, btl=ofi", "reproduced"),
        ("reproduction plugin, dso, btl=ofi", "reproduced"),
        ("reproduction plugin, dso, no quarantine, btl=ofi", "reproduced"),
        ("pmca memory/patcher, static, btl=ofi", "prevented"),
        ("pmca memory/patcher, dso, btl=ofi", "prevented"),
    ]
    ofi_rows = ofi if ofi_unavailable() is None else [(v, "skipped") for v, _ in ofi]

    assert all(isinstance(r, ScenarioResult) and r.scenario == SCENARIO for r in results)
    assert [(r.variant, r.outcome) for r in results] == [
        ("reproduction plugin, static", "reproduced"),
        ("reproduction plugin, dso", "reproduced"),
        ("reproduction plugin, dso, no quarantine", "reproduced"),
        ("reproduction plugin, static, stale check", "detected"),
        ("reproduction plugin, dso, stale check", "detected"),
        ("pmca memory/patcher, static", "prevented"),
        ("pmca memory/patcher, dso", "prevented"),
        *ofi_rows,
        ("reproduction plugin, dso, btl=tcp", "reproduced"),
        ("pmca memory/patcher, dso, btl=tcp", "prevented"),
    ], "\n".join(r.detail for r in results)
    assert all(r.ok for r in results)
    assert "SIGSEGV in opal_patcher_base_restore_all" in results[1].detail
    # Where the library came back is measured, not assumed: the detail says
    # which it was, and its addresses agree with what it says.
    no_quarantine = results[2].detail
    addresses = [int(a, 16) for a in re.findall(r"\((0x[0-9a-f]+)\)", no_quarantine)]
    if "reloaded at its old address" in no_quarantine:
        assert len(addresses) == 1, no_quarantine  # one address: both were the same
    else:
        assert "reloaded elsewhere" in no_quarantine, no_quarantine
        old, new = addresses[:2]
        assert old != new, no_quarantine
    assert "claimed FREE|MUNMAP" in results[0].detail
    assert "pmca_ompi_13021.patcher_base.opal_patcher" in results[3].detail


def test_reproduction_rows_skip_without_the_plugin(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("pmca.scenarios.ompi_13021.plugin_installed", lambda: False)
    for variant in [v for v in VARIANTS if v.component == "ompi13021"]:
        result = run_variant(variant)
        assert result.outcome == "skipped" and result.ok
        assert "pmca-ompi-13021 is not installed" in result.detail


# -- classification of what a child did -----------------------------------------


def round_record(number: int, component: str, mode: str, delivered: bool) -> dict[str, Any]:
    return {
        "event": "round",
        "round": number,
        "memory": [[component, "static"]],
        "patcher": [["overwrite", mode]],
        "support": CLAIMED,
        "munmap_hooked": delivered,
        "delivered": delivered,
    }


SEGV_IN_RESTORE = (
    "Fatal Python error: Segmentation fault\n\n"
    "Current thread 0x1 (most recent call first):\n"
    '  File "patcher_base.py", line 9 in opal_patcher_base_restore_all\n'
)


@pytest.mark.parametrize(
    ("second", "said"),
    [
        (0x7F0000001040, "reloaded at its old address (0x7f0000001040)"),
        (
            0x7F0000009040,
            "old address (0x7f0000001040); it was reloaded elsewhere (0x7f0000009040)",
        ),
        (None, "where it reloaded: unknown"),
    ],
)
def test_the_crash_says_where_the_library_was_reloaded(second: int | None, said: str) -> None:
    variant = Variant("ompi13021", "dso", quarantine=False)
    first = round_record(1, "ompi13021", "dso", True) | {"base_part": 0x7F0000001040}
    records = [first, round_record(2, "ompi13021", "dso", False) | {"base_part": second}]
    outcome, detail = classify(variant, -11, records, SEGV_IN_RESTORE)
    assert outcome == "reproduced" and said in detail, detail
    if second != 0x7F0000001040:
        assert "reloaded at its old address" not in detail


def end_record(restored: bool) -> dict[str, Any]:
    return {"event": "end", "prologues_restored": restored, "changed": [] if restored else ["brk"]}


def test_unavailable_backend_is_skipped() -> None:
    records = [{"event": "unavailable", "reason": "not x86_64"}]
    outcome, detail = classify(Variant("patcher", "dso"), 0, records, "")
    assert outcome == "skipped" and "not x86_64" in detail


def test_a_reproduction_that_does_not_reproduce_fails() -> None:
    variant = Variant("ompi13021", "static")
    records = [
        round_record(1, "ompi13021", "static", True),
        round_record(2, "ompi13021", "static", True),
        end_record(True),
    ]
    outcome, detail = classify(variant, 0, records, "")
    assert outcome == "failed" and "unexpected" in detail


def test_a_crash_elsewhere_is_not_the_reproduction() -> None:
    variant = Variant("ompi13021", "dso")
    records = [
        round_record(1, "ompi13021", "dso", True),
        round_record(2, "ompi13021", "dso", False),
    ]
    # restore-all is on the stack, but the fault is in a frame inside it.
    stderr = (
        "Fatal Python error: Segmentation fault\n\n"
        "Current thread 0x1 (most recent call first):\n"
        '  File "x.py", line 1 in drain\n'
        '  File "y.py", line 9 in opal_patcher_base_restore_all\n'
    )
    outcome, detail = classify(variant, -11, records, stderr)
    assert outcome == "failed" and "not in opal_patcher_base_restore_all" in detail


def test_prevention_needs_restored_prologues() -> None:
    variant = Variant("patcher", "static")
    records = [
        round_record(1, "patcher", "static", True),
        round_record(2, "patcher", "static", True),
        end_record(False),
    ]
    outcome, detail = classify(variant, 0, records, "")
    assert outcome == "failed" and "brk" in detail


def test_a_row_that_ran_the_wrong_load_mode_fails() -> None:
    variant = Variant("patcher", "dso")
    records = [
        round_record(1, "patcher", "static", True),
        round_record(2, "patcher", "static", True),
        end_record(True),
    ]
    outcome, detail = classify(variant, 0, records, "")
    assert outcome == "failed" and "overwrite" in detail


# -- the example ---------------------------------------------------------------


def test_example_prints_the_table() -> None:
    if not EXAMPLE.exists():
        pytest.skip(f"{EXAMPLE.name} is not shipped with this copy of the tests")
    child = subprocess.run(
        [sys.executable, "-X", "faulthandler", str(EXAMPLE)],
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    assert child.returncode == 0, child.stdout + child.stderr
    rows = [line for line in child.stdout.splitlines() if line.startswith(SCENARIO)]
    assert len(rows) == len(VARIANTS), child.stdout
    assert all(variant.label in child.stdout for variant in VARIANTS)
