"""Seed scenario 3: the leave_pinned x leave_pinned_pipeline matrix and the self-test."""

from __future__ import annotations

import pytest

from pmca.memory import FREE, MUNMAP, _activation
from pmca.scenarios import activation
from pmca.scenarios.activation import CELLS, EXPECTED, CellResult, SelfTest


def test_pmca_matrix_matches_open_mpis_table() -> None:
    assert len(CELLS) == 16
    for (leave_pinned, pipeline), decision in EXPECTED.items():
        assert _activation.decide(leave_pinned, pipeline) == decision, (leave_pinned, pipeline)


@pytest.mark.usefixtures("native_backend")
def test_run_reports_every_cell_as_the_matrix_says() -> None:
    matrix, self_test = activation.run()
    assert matrix.outcome == "prevented", matrix.detail
    assert "7 install at open, 4 on first need, 5 never" in matrix.detail
    assert self_test.outcome == "prevented", self_test.detail
    assert "FREE|MUNMAP" in self_test.detail


@pytest.mark.usefixtures("native_backend")
def test_each_cell_measured_for_real() -> None:
    cells, self_test, error = activation.run_cells()
    assert error == ""
    assert [(c.leave_pinned, c.pipeline) for c in cells] == list(CELLS)
    for cell in cells:
        assert cell.problems() == [], cell.label
        assert cell.restored
        if cell.expected == "no":
            assert cell.after_register is None
            assert "mpi_leave_pinned_pipeline" in cell.register_error
    assert self_test is not None
    assert self_test.support == int(FREE | MUNMAP) == self_test.expected_support()


def test_a_cell_that_misbehaves_is_reported() -> None:
    # "no" x "no" that installed at open and gave a vague error: three problems.
    cell = CellResult("no", "no", True, True, None, "no hooks", True, True)
    problems = cell.problems()
    assert "hooks installed at open" in problems
    assert "hooks installed after a component needing registration" in problems
    assert any("does not name both parameters" in p for p in problems)
    assert CellResult("runtime", "runtime", False, False, True, "", False, True).problems() == [
        "hooks not installed after a component needing registration",
        "libc prologues not restored after finalize",
    ]


def test_support_level_follows_open_mpis_rule() -> None:
    everything = dict.fromkeys(("munmap", "madvise", "mremap", "brk"), True)
    assert SelfTest(everything, 0, "").expected_support() == int(FREE | MUNMAP)
    assert SelfTest({**everything, "brk": False}, 0, "").expected_support() == int(MUNMAP)
    assert SelfTest({**everything, "munmap": False}, 0, "").expected_support() == 0
