"""What running a seed scenario reports."""

from __future__ import annotations

from typing import Literal

from attrs import frozen

from .._public import public

Outcome = Literal["reproduced", "detected", "prevented", "failed", "skipped"]


@public
@frozen
class ScenarioResult:
    """One row of a scenario table.

    :param scenario: the seed scenario (``ompi-13021``, ``madvise-deadlock``, ...).
    :param variant: what this row ran (``reproduction plugin, dso``, ...).
    :param outcome: ``reproduced`` (the historical failure happened, on
        purpose), ``detected`` (pmca named the fault before it could do
        harm), ``prevented`` (pmca's design kept it from happening),
        ``failed`` (something else went wrong: a bug) or ``skipped`` (cannot
        run here, e.g. no native backend).
    :param detail: one line a person can act on.
    """

    scenario: str
    variant: str
    outcome: Outcome
    detail: str

    @property
    def ok(self) -> bool:
        """Whether the row shows what it should (a reproduction that reproduces counts)."""
        return self.outcome in ("reproduced", "detected", "prevented", "skipped")


@public
def format_table(results: list[ScenarioResult]) -> str:
    """A fixed-width table of results."""
    if not results:
        return "(no scenarios)"
    widths = [
        max(len(r.scenario) for r in results),
        max(len(r.variant) for r in results),
        max(len(r.outcome) for r in results),
    ]
    lines = []
    for r in results:
        cells = (r.scenario, r.variant, r.outcome)
        padded = [cell.ljust(width) for cell, width in zip(cells, widths, strict=True)]
        lines.append("  ".join((*padded, r.detail)))
    return "\n".join(lines)
