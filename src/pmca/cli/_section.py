"""One titled part of ``pmca doctor``'s report, shared by its sections."""

from __future__ import annotations

from typing import Any, Literal

from attrs import Factory, define, frozen

__all__ = ["Check", "Section", "Status"]

Status = Literal["ok", "warn", "fail", "skip", "info"]

_TAGS: dict[Status, str] = {"ok": "ok", "warn": "WARN", "fail": "FAIL", "skip": "skip", "info": ""}


@frozen
class Check:
    """One verdict line of a section."""

    status: Status
    name: str
    detail: str


@define
class Section:
    """A titled part of the report: verdict lines, text lines (tables) and data for ``--json``."""

    title: str
    checks: list[Check] = Factory(list)
    lines: list[str] = Factory(list)
    data: dict[str, Any] = Factory(dict)
    #: ``False`` for a section about third parties' components: reported, never the verdict.
    judged: bool = True

    def add(self, status: Status, name: str, detail: str) -> None:
        self.checks.append(Check(status, name, detail))

    def render(self) -> str:
        out = [f"== {self.title} =="]
        out.extend(f"  {line}" for line in self.lines)
        width = max((len(check.name) for check in self.checks), default=0)
        for check in self.checks:
            out.append(f"  {_TAGS[check.status]:<4}  {check.name:<{width}}  {check.detail}")
        return "\n".join(out)
