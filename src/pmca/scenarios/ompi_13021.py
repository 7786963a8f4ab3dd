"""Seed scenario 1: Open MPI's DSO double-finalize crash (open-mpi/ompi#13021).

``sessions_init_twice`` (two complete session lifetimes in one process) is
run in a fresh interpreter for each cell of {static, dso} x {the
reproduction plugin ``pmca-ompi-13021`` (Open MPI 5.0.6's memory/patcher),
pmca's own memory/patcher (the fix and then some)}:

=========================  ================================================
reproduction, dso          reproduced: the second finalize dies of SIGSEGV
                           in ``opal_patcher_base_restore_all``
reproduction, static       reproduced: session 2 delivers no release event
                           while ``support_level()`` claims FREE|MUNMAP
pmca memory/patcher, both  prevented: both sessions deliver events and
                           libc's prologues are back to their original
                           bytes after the last finalize
=========================  ================================================

A row is ``skipped`` when the native backend is unavailable or the plugin
is not installed, and ``failed`` for anything else.
"""

from __future__ import annotations

import signal
import time
from typing import Any, Final, Literal

import importlib_metadata
from attrs import frozen

from ..memory import Support
from ._13021_child import parse
from ._common import run_child
from ._result import Outcome, ScenarioResult

SCENARIO = "ompi-13021"
#: The reproduction plugin's component name and distribution.
REPRODUCTION: Final = "ompi13021"
REPRODUCTION_DISTRIBUTION = "pmca-ompi-13021"
#: The frame where Open MPI crashed; the faulthandler trace must pass through it.
CRASH_FRAME = "opal_patcher_base_restore_all"

Component = Literal["ompi13021", "patcher"]
Mode = Literal["static", "dso"]

_CHILD_MODULE = "pmca.scenarios._13021_child"


@frozen
class Variant:
    """One cell of the matrix: which memory component, which load mode."""

    component: Component
    mode: Mode

    @property
    def label(self) -> str:
        who = "reproduction plugin" if self.component == REPRODUCTION else "pmca memory/patcher"
        return f"{who}, {self.mode}"

    @property
    def env(self) -> dict[str, str]:
        """The cell's ``PMCA_MCA_*`` settings: the memory selection and both load-mode variables."""
        return {
            "PMCA_MCA_memory": self.component,
            "PMCA_MCA_mca_base_component_dso": "all" if self.mode == "dso" else "none",
            "PMCA_MCA_mca_base_component_static": "none",
        }


VARIANTS: tuple[Variant, ...] = (
    Variant(REPRODUCTION, "static"),
    Variant(REPRODUCTION, "dso"),
    Variant("patcher", "static"),
    Variant("patcher", "dso"),
)


def plugin_installed() -> bool:
    """Whether the reproduction plugin's entry point is installed."""
    return any(
        ep.name == REPRODUCTION for ep in importlib_metadata.entry_points(group="pmca.memory")
    )


def run_matrix(*, timeout: float = 120.0) -> list[ScenarioResult]:
    """Run the four cells in turn, each in a fresh interpreter given ``timeout`` seconds."""
    return [run_variant(variant, timeout=timeout) for variant in VARIANTS]


def run_variant(variant: Variant, *, timeout: float = 120.0) -> ScenarioResult:
    """Run one cell and classify what happened.

    The child sees none of the user's ``PMCA_MCA_*`` settings but the ones
    the cell makes (a user's ``memory_patcher_disable`` must not turn a
    prevention into a failure); after ``timeout`` seconds it dumps every
    thread's stack and exits.
    """
    if variant.component == REPRODUCTION and not plugin_installed():
        return _result(
            variant,
            "skipped",
            f"{REPRODUCTION_DISTRIBUTION} is not installed "
            f"(pip install plugins/{REPRODUCTION_DISTRIBUTION})",
        )
    started = time.monotonic()
    child = run_child(_CHILD_MODULE, "main", hang_after=timeout, env=variant.env)
    elapsed = time.monotonic() - started
    if child.hung or child.returncode is None:
        return _result(variant, "failed", f"{child.describe_failure()} ({elapsed:.0f} s)")
    outcome, detail = classify(variant, child.returncode, parse(child.stdout), child.stderr)
    return _result(variant, outcome, f"{detail} ({elapsed:.1f} s)")


def _result(variant: Variant, outcome: Outcome, detail: str) -> ScenarioResult:
    return ScenarioResult(SCENARIO, variant.label, outcome, detail)


def _rounds(records: list[dict[str, Any]]) -> dict[int, dict[str, Any]]:
    return {int(r["round"]): r for r in records if r["event"] == "round"}


def _setup_problem(variant: Variant, rounds: dict[int, dict[str, Any]]) -> str | None:
    """Why the child did not run the cell it was asked to, if it did not."""
    for number, record in sorted(rounds.items()):
        memory = [tuple(item) for item in record["memory"]]
        if memory != [(variant.component, "static")]:
            return f"session {number} selected memory components {memory}"
        patcher = [tuple(item) for item in record["patcher"]]
        if patcher != [("overwrite", variant.mode)]:
            return f"session {number} selected patcher components {patcher}"
    return None


def _last_line(text: str) -> str:
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    return lines[-1] if lines else "(no output)"


def _exit_description(returncode: int) -> str:
    if returncode < 0:
        try:
            return f"died of {signal.Signals(-returncode).name}"
        except ValueError:
            return f"died of signal {-returncode}"
    return f"exited {returncode}"


def classify(
    variant: Variant, returncode: int, records: list[dict[str, Any]], stderr: str
) -> tuple[Outcome, str]:
    """Decide a cell's outcome from the child's exit, records and stderr."""
    unavailable = [r for r in records if r["event"] == "unavailable"]
    if unavailable and returncode == 0:
        return "skipped", f"native backend unavailable: {unavailable[0]['reason']}"
    rounds = _rounds(records)
    problem = _setup_problem(variant, rounds)
    if problem is not None:
        return "failed", problem
    support = Support(int(rounds[2]["support"])) if 2 in rounds else Support.NONE
    claimed = support & (Support.FREE | Support.MUNMAP) == Support.FREE | Support.MUNMAP
    first_ok = 1 in rounds and bool(rounds[1]["delivered"])
    if variant.component == REPRODUCTION:
        if variant.mode == "dso" and returncode == -signal.SIGSEGV:
            if CRASH_FRAME in stderr and first_ok and 2 in rounds:
                return "reproduced", (
                    f"second finalize died of SIGSEGV in {CRASH_FRAME} through a stale "
                    "opal_patcher into the unloaded overwrite library"
                )
            return "failed", f"SIGSEGV, but not in {CRASH_FRAME}: {_last_line(stderr)}"
        silent = 2 in rounds and not rounds[2]["delivered"] and claimed
        if variant.mode == "static" and returncode == 0 and first_ok and silent:
            return "reproduced", (
                "session 2 delivered no munmap event while support_level() "
                "claimed FREE|MUNMAP (silent bug)"
            )
    elif returncode == 0 and len(rounds) == 2:
        end = [r for r in records if r["event"] == "end"]
        delivered = all(bool(r["delivered"]) for r in rounds.values())
        restored = bool(end) and bool(end[0]["prologues_restored"])
        if delivered and restored:
            return "prevented", (
                "both sessions delivered release events; libc prologues byte-exact "
                "after the last finalize"
            )
        if not restored:
            changed = end[0]["changed"] if end else "unknown"
            return "failed", f"libc prologues still modified after the last finalize: {changed}"
    delivered_by_round = {n: bool(r["delivered"]) for n, r in sorted(rounds.items())}
    return "failed", (
        f"unexpected: child {_exit_description(returncode)}, events delivered per session "
        f"{delivered_by_round}, session 2 support {int(support)}: {_last_line(stderr)}"
    )


__all__ = [
    "CRASH_FRAME",
    "SCENARIO",
    "VARIANTS",
    "Variant",
    "classify",
    "plugin_installed",
    "run_matrix",
    "run_variant",
]
