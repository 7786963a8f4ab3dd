"""When the memory hooks are installed: Open MPI's leave_pinned matrix.

Rows are ``mpi_leave_pinned``, columns ``mpi_leave_pinned_pipeline``, each
``yes``, ``no``, ``runtime`` (explicitly ``auto``) or not set at all::

    lp \\ lpp    yes   no    runtime   not set
    yes         yes   yes   yes       yes
    no          yes   no    no        no
    runtime     yes   no    runtime   runtime
    not set     yes   no    runtime   runtime

``yes`` installs the hooks when the memory framework opens, ``no`` never
does, and ``runtime`` installs them as soon as something needs them: a
selected component that needs registration, or the first
``register_release()``.

That is the seed's matrix (Open MPI's ptmalloc2-era notes), pmca's own
rules. Open MPI 5.x decides in ``rcache_base_create.c`` (5.0.6, line 60):
the memory framework opens, and hooks go in, at the first registration cache
whenever ``mpi_leave_pinned != 0`` or the pipeline is on. With
``leave_pinned`` auto (-1) that is true, so the cells (runtime, no) and
(not set, no) are ``runtime`` there. A memory module that reproduces 5.x
says so with ``activation_rules = "ompi-5"``.
"""

from __future__ import annotations

from typing import Literal

Setting = Literal["yes", "no", "runtime", "not set"]
Decision = Literal["yes", "no", "runtime"]
Rules = Literal["seed", "ompi-5"]

_MATRIX: dict[Setting, dict[Setting, Decision]] = {
    "yes": {"yes": "yes", "no": "yes", "runtime": "yes", "not set": "yes"},
    "no": {"yes": "yes", "no": "no", "runtime": "no", "not set": "no"},
    "runtime": {"yes": "yes", "no": "no", "runtime": "runtime", "not set": "runtime"},
    "not set": {"yes": "yes", "no": "no", "runtime": "runtime", "not set": "runtime"},
}


def setting(value: int, *, explicitly_set: bool) -> Setting:
    """Classify an auto-bool parameter value (1, 0, -1) and whether anyone set it."""
    if not explicitly_set:
        return "not set"
    return {1: "yes", 0: "no"}.get(value, "runtime")  # type: ignore[return-value]


_OMPI5_DIFFERENCES: dict[tuple[Setting, Setting], Decision] = {
    ("runtime", "no"): "runtime",
    ("not set", "no"): "runtime",
}


def decide(leave_pinned: Setting, pipeline: Setting, *, rules: Rules = "seed") -> Decision:
    """The matrix cell for these two settings, under pmca's or Open MPI 5.x's rules."""
    if rules == "ompi-5":
        different = _OMPI5_DIFFERENCES.get((leave_pinned, pipeline))
        if different is not None:
            return different
    return _MATRIX[leave_pinned][pipeline]
