"""``pmca info --check``: open and query each component on its own, and say how it went.

``pmca info`` only imports and registers components: one that raises in
``open`` or declines in ``query`` looks fine there. ``--check`` runs each
component through a session of its own, with the framework's selection
parameter naming that component only, so that no other component's
priority or failure decides what is reported.
"""

from __future__ import annotations

from collections.abc import Sequence

from attrs import frozen

from .._records import FrozenValue
from ..runtime import RUNTIME, inventory
from ..session import Session
from ._errors import UsageError
from ._model import Fact
from ._text import Parsable, Readable

__all__ = ["CheckResult", "check", "render_check"]

AVAILABLE, DECLINED, FAILED = "available", "declined", "failed"
_SHOW_LOAD_ERRORS = "mca_base_component_show_load_errors"


@frozen(eq=False, repr=False)
class CheckResult(FrozenValue):
    """What opening and querying one component on its own gave."""

    framework: str
    component: str
    state: str
    detail: str


def _targets(given: dict[str, str], target: str | None) -> tuple[list[CheckResult], list[str]]:
    """What fails before any open (import, validate, register), and what to open.

    Returns the failures found while registering, and ``fw/comp`` for every
    component to open and query.
    """
    failed: list[CheckResult] = []
    wanted, _, component = (target or "").partition("/")
    # Every failure is this command's output, not a log line.
    with Session(mca={_SHOW_LOAD_ERRORS: "none", **given}, frameworks=[]):
        known = list(RUNTIME.catalog.frameworks)
        if wanted and wanted not in known:
            raise UsageError(
                f"--check: no framework {wanted!r} (installed: {', '.join(sorted(known))})"
            )
        for broken in RUNTIME.catalog.failures:
            if not wanted or broken.name == wanted:
                failed.append(CheckResult(broken.name, "", FAILED, broken.reason))
        with inventory([wanted] if wanted else None) as entries:
            names = [
                (entry.framework.name, name)
                for entry in entries
                for name in sorted(
                    {c.name for c in entry.components} | {f.component for f in entry.failures}
                )
            ]
            failed.extend(
                CheckResult(f.framework, f.component, FAILED, f.reason)
                for entry in entries
                for f in entry.failures
            )
    if component and (wanted, component) not in names:
        found = ", ".join(name for fw, name in names if fw == wanted) or "none"
        raise UsageError(f"--check: framework {wanted!r} has no component {component!r} ({found})")
    broken_ones = {(r.framework, r.component) for r in failed}
    todo = [
        f"{fw}/{name}"
        for fw, name in names
        if (fw, name) not in broken_ones and (not component or name == component)
    ]
    return [r for r in failed if not component or r.component == component], todo


def _check_one(given: dict[str, str], framework: str, component: str) -> CheckResult:
    """Open ``framework`` with ``component`` alone selected; its state once queried."""
    quiet = {_SHOW_LOAD_ERRORS: "none", f"{framework}_base_verbose": "none"}
    mca = {**quiet, **given, framework: component}
    failures: list[str] = []
    offered: int | None = None
    why = "not used"
    closed_before = len(RUNTIME.close_failures)
    try:
        with Session(mca=mca, frameworks=[framework]) as session:
            for info in session.components(framework):  # a deferred selection settles here
                if info.name == component:
                    offered = info.priority
            state = RUNTIME.frameworks[framework]
            failures.extend(f.reason for f in state.failures if f.component == component)
            why = state.dropped.get(component, why)
        failures.extend(
            f.reason
            for f in RUNTIME.close_failures[closed_before:]
            if (f.framework, f.component) == (framework, component)
        )
    except Exception as exc:  # the session itself: a base, a dependency, a bad value
        failures.append(f"the session failed: {type(exc).__name__}: {exc}")
    if failures:
        return CheckResult(framework, component, FAILED, "; ".join(failures))
    if offered is not None:
        return CheckResult(
            framework, component, AVAILABLE, f"opened, query offered priority {offered}"
        )
    return CheckResult(framework, component, DECLINED, why)


def check(given: dict[str, str], target: str | None) -> list[CheckResult]:
    """Open and query every component of ``target`` (``fw``, ``fw/comp``, or all) on its own."""
    results, todo = _targets(given, target)
    for item in todo:
        framework, _, component = item.partition("/")
        results.append(_check_one(given, framework, component))
    return sorted(results, key=lambda r: (r.framework, r.component))


def render_check(results: Sequence[CheckResult], *, parsable: bool, width: int | None) -> str:
    """The results, one line per component and a count (readable or ``--parsable``)."""
    counts = {
        state: sum(r.state == state for r in results) for state in (AVAILABLE, DECLINED, FAILED)
    }
    summary = ", ".join(f"{n} {state}" for state, n in counts.items())
    out = Parsable() if parsable else Readable()
    for r in results:
        out.fact(
            Fact(
                f"MCA {r.framework}",
                f"mca:{r.framework}:{r.component or 'framework'}:check:{r.state}",
                f"{r.detail}"
                if parsable
                else f"{r.component or '(framework)'}: {r.state}: {r.detail}",
            )
        )
    if isinstance(out, Parsable):
        for state, count in counts.items():
            out.fact(Fact("", f"check:{state}", str(count)))
    else:
        noun = "component" if len(results) == 1 else "components"
        out.fact(Fact("Checked", "", f"{len(results)} {noun}: {summary}"))
    lines = out.lines() if isinstance(out, Parsable) else out.lines(width=width)
    return "".join(line + "\n" for line in lines)
