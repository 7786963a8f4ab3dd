"""Seed scenario 3: hook activation rules (Open MPI's ptmalloc2 notes).

Open MPI installs its memory hooks according to ``mpi_leave_pinned`` x
``mpi_leave_pinned_pipeline``, each ``yes``, ``no``, ``runtime`` (auto) or
not set, and sets the support level from what actually works.  This
scenario runs all 16 cells for real, in a fresh process, and checks three
moments of each: right after the memory framework opens, after a selected
component that declares ``needs_registration`` opens, and at the first
``register_release()``.  "Installed" means libc's prologues really jump to
pmca's hooks, not just that the module says so.

The expectation table below is transcribed from Open MPI's notes on its
own, independently of :mod:`pmca.memory._activation`, so a wrong cell there
shows up here.
"""

from __future__ import annotations

import sys
import tempfile
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Literal

from attrs import asdict, frozen

from ._common import emit, run_child, skipped_without_native
from ._result import ScenarioResult

SCENARIO = "activation"

Setting = Literal["yes", "no", "runtime", "not set"]
Decision = Literal["yes", "no", "runtime"]

SETTINGS: tuple[Setting, ...] = ("yes", "no", "runtime", "not set")

#: (mpi_leave_pinned, mpi_leave_pinned_pipeline) → when hooks go in.  Any
#: "yes" pipeline forces hooks; an explicit "no" on either side otherwise
#: forbids them; everything else waits until something needs them.
EXPECTED: Mapping[tuple[Setting, Setting], Decision] = {
    ("yes", "yes"): "yes",
    ("yes", "no"): "yes",
    ("yes", "runtime"): "yes",
    ("yes", "not set"): "yes",
    ("no", "yes"): "yes",
    ("no", "no"): "no",
    ("no", "runtime"): "no",
    ("no", "not set"): "no",
    ("runtime", "yes"): "yes",
    ("runtime", "no"): "no",
    ("runtime", "runtime"): "runtime",
    ("runtime", "not set"): "runtime",
    ("not set", "yes"): "yes",
    ("not set", "no"): "no",
    ("not set", "runtime"): "runtime",
    ("not set", "not set"): "runtime",
}

CELLS: tuple[tuple[Setting, Setting], ...] = tuple(EXPECTED)

#: How each setting is given to a session; "not set" gives nothing at all.
_VALUES: Mapping[Setting, str] = {"yes": "true", "no": "false", "runtime": "auto"}

#: A throwaway framework whose only component needs memory registration.
REGISTERING_FRAMEWORK = "scnregcache"
_REGISTERING_MODULE = "pmca_scenario_regcache"
_REGISTERING_SOURCE = f'''
"""A registration-cache-like framework for the activation scenario."""
import pmca

FRAMEWORK = pmca.Framework(
    name="{REGISTERING_FRAMEWORK}",
    description="stands in for a registration cache",
    api_version="1.0.0",
)


class Module:
    pass


class PinnedComponent(pmca.Component):
    framework = "{REGISTERING_FRAMEWORK}"
    name = "pinned"
    version = "1.0.0"
    api_version = "1.0.0"
    needs_registration = True

    @pmca.hookimpl
    def query(self, ctx):
        return pmca.Query(priority=10, module=Module())
'''


def cell_mca(leave_pinned: Setting, pipeline: Setting) -> dict[str, str]:
    """Session parameters for one cell; a "not set" axis is left out entirely."""
    mca = {}
    for name, value in (
        ("mpi_leave_pinned", leave_pinned),
        ("mpi_leave_pinned_pipeline", pipeline),
    ):
        if value != "not set":
            mca[name] = _VALUES[value]
    return mca


@frozen
class CellResult:
    """What one cell did.  ``None`` for ``after_register`` means it raised ``register_error``."""

    leave_pinned: Setting
    pipeline: Setting
    at_open: bool
    after_component: bool
    after_register: bool | None
    register_error: str
    restored: bool
    claims_match: bool

    @property
    def expected(self) -> Decision:
        return EXPECTED[(self.leave_pinned, self.pipeline)]

    def problems(self) -> list[str]:
        """How this cell differs from the matrix (empty when it behaved)."""
        expected = self.expected
        wanted = {
            "at open": expected == "yes",
            "after a component needing registration": expected != "no",
            "after register_release()": expected != "no",
        }
        seen = {
            "at open": self.at_open,
            "after a component needing registration": self.after_component,
            "after register_release()": bool(self.after_register),
        }
        problems = [
            f"hooks {'installed' if seen[moment] else 'not installed'} {moment}"
            for moment in wanted
            if wanted[moment] != seen[moment]
        ]
        if expected == "no" and not all(
            name in self.register_error
            for name in ("mpi_leave_pinned", "mpi_leave_pinned_pipeline")
        ):
            problems.append(
                f"register_release() error does not name both parameters: {self.register_error!r}"
            )
        if not self.restored:
            problems.append("libc prologues not restored after finalize")
        if not self.claims_match:
            problems.append("memory module's installed() disagrees with libc's bytes")
        return problems

    @property
    def label(self) -> str:
        return f"lp={self.leave_pinned}/lpp={self.pipeline}"


@frozen
class SelfTest:
    """The release-path self-test behind the support level."""

    probes: dict[str, bool]
    support: int
    support_name: str

    def expected_support(self) -> int:
        """Open MPI's rule: MUNMAP needs munmap; FREE also madvise, mremap and brk."""
        from ..memory import FREE, MUNMAP

        support = 0
        if self.probes.get("munmap"):
            support |= int(MUNMAP)
            if all(self.probes.get(s) for s in ("madvise", "mremap", "brk")):
                support |= int(FREE)
        return support


def support_name(support: int) -> str:
    """``FREE|MUNMAP`` style, the same on every Python version."""
    from ..memory import Support

    names = [flag.name for flag in Support if flag and flag & support and flag.name]
    return "|".join(names) or "NONE"


# -- the child: measure every cell -------------------------------------------------------


def _hooks_live() -> bool:
    from .. import native
    from ..memory.patcher._module import SYMBOLS

    hooks = native.backend()
    return all(hooks.is_installed(symbol) for symbol in SYMBOLS)


def _hooks_gone() -> bool:
    from .. import native
    from ..memory.patcher._module import SYMBOLS

    hooks = native.backend()
    return not any(hooks.is_installed(symbol) for symbol in SYMBOLS)


def _installed(module: object) -> tuple[bool, bool]:
    """(libc really patched, the module's claim agrees)."""
    from ..memory import MemoryModule

    live = _hooks_live()
    claim = isinstance(module, MemoryModule) and module.installed()
    return live, claim == live


def _ignore(address: int, length: int, kind: str, from_alloc: bool) -> None:
    """A release callback that only needs to exist."""


def measure_cell(
    leave_pinned: Setting, pipeline: Setting, framework: str = REGISTERING_FRAMEWORK
) -> tuple[CellResult, SelfTest | None]:
    """Run one cell in this process, in two fresh session lifetimes.

    ``framework`` must be installed and have a selected component with
    ``needs_registration``.  No session may be alive when this is called.
    """
    from .. import memory
    from ..session import Session

    mca = cell_mca(leave_pinned, pipeline)
    agree = True
    with Session(mca=mca, frameworks=["memory"]) as session:
        module = session.module("memory")
        at_open, ok = _installed(module)
        agree &= ok
        with Session(frameworks=[framework]):
            after_component, ok = _installed(module)
            agree &= ok
    restored = _hooks_gone()

    self_test = None
    error = ""
    with Session(mca=mca, frameworks=["memory"]) as session:
        module = session.module("memory")
        try:
            handle = memory.register_release(_ignore)
        except memory.MemoryHooksUnavailable as exc:
            after_register: bool | None = None
            error = str(exc)
        else:
            after_register, ok = _installed(module)
            agree &= ok
            probes = dict(getattr(module, "self_test", {}))
            support = memory.support_level()
            self_test = SelfTest(probes, int(support), support_name(support))
            handle.unregister()
    restored &= _hooks_gone()
    cell = CellResult(
        leave_pinned, pipeline, at_open, after_component, after_register, error, restored, agree
    )
    return cell, self_test


def _child(site: str) -> None:
    """Entry point of the child process: measure all cells and emit them."""
    sys.path.insert(0, site)
    cells = []
    self_test = None
    for leave_pinned, pipeline in CELLS:
        cell, measured = measure_cell(leave_pinned, pipeline)
        cells.append(asdict(cell))
        self_test = self_test or measured
    emit({"cells": cells, "self_test": asdict(self_test) if self_test else None})


# -- the parent --------------------------------------------------------------------------


def _install_registering_framework(root: Path) -> None:
    from ..testing import make_distribution

    make_distribution(
        root,
        "pmca-scenario-regcache",
        entry_points={
            "pmca.frameworks": {REGISTERING_FRAMEWORK: f"{_REGISTERING_MODULE}:FRAMEWORK"},
            f"pmca.{REGISTERING_FRAMEWORK}": {"pinned": f"{_REGISTERING_MODULE}:PinnedComponent"},
        },
        modules={_REGISTERING_MODULE: _REGISTERING_SOURCE},
    )


def run_cells(*, timeout: float = 60.0) -> tuple[list[CellResult], SelfTest | None, str]:
    """Measure the 16 cells in a child process.

    Returns the cells, the self-test seen in the first cell that installed
    hooks, and an error line (empty when the child reported).
    """
    with tempfile.TemporaryDirectory(prefix="pmca-activation-") as site:
        _install_registering_framework(Path(site))
        child = run_child(__name__, "_child", site, hang_after=timeout)
    if not child.completed or child.payload is None:
        return [], None, child.describe_failure()
    cells = [CellResult(**raw) for raw in child.payload["cells"]]
    raw_test: dict[str, Any] | None = child.payload["self_test"]
    return cells, SelfTest(**raw_test) if raw_test else None, ""


def _matrix_row(cells: list[CellResult]) -> ScenarioResult:
    variant = "leave_pinned x pipeline (16 cells)"
    bad = [(cell, cell.problems()) for cell in cells]
    bad = [(cell, problems) for cell, problems in bad if problems]
    if bad:
        detail = "; ".join(f"{cell.label}: {', '.join(problems)}" for cell, problems in bad)
        return ScenarioResult(SCENARIO, variant, "failed", detail)
    counts = {d: sum(1 for c in cells if c.expected == d) for d in ("yes", "runtime", "no")}
    return ScenarioResult(
        SCENARIO,
        variant,
        "prevented",
        f"every cell as Open MPI's table: {counts['yes']} install at open, "
        f"{counts['runtime']} on first need, {counts['no']} never (register_release names "
        "both parameters)",
    )


def _self_test_row(self_test: SelfTest | None) -> ScenarioResult:
    variant = "release-path self-test"
    if self_test is None:
        return ScenarioResult(SCENARIO, variant, "failed", "no cell installed the hooks")
    failing = [name for name, ok in self_test.probes.items() if not ok]
    probes = "all probes passed" if not failing else f"failing probes: {', '.join(failing)}"
    if self_test.support != self_test.expected_support():
        return ScenarioResult(
            SCENARIO,
            variant,
            "failed",
            f"support {self_test.support_name} does not follow the self-test ({probes})",
        )
    return ScenarioResult(
        SCENARIO,
        variant,
        "prevented",
        f"support {self_test.support_name} from the self-test; {probes}",
    )


def run(*, timeout: float = 60.0) -> list[ScenarioResult]:
    """Run all 16 cells for real; one row for the matrix, one for the self-test."""
    skipped = skipped_without_native(SCENARIO)
    if skipped is not None:
        return skipped
    cells, self_test, error = run_cells(timeout=timeout)
    if error:
        return [ScenarioResult(SCENARIO, "leave_pinned x pipeline (16 cells)", "failed", error)]
    return [_matrix_row(cells), _self_test_row(self_test)]
