"""The seed scenarios: classic failures of memory-hook machinery, reproduced and prevented."""

from __future__ import annotations

from ._result import Outcome, ScenarioResult, format_table

__all__ = ["Outcome", "ScenarioResult", "format_table"]
