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
"""

from __future__ import annotations

from typing import Literal

Setting = Literal["yes", "no", "runtime", "not set"]
Decision = Literal["yes", "no", "runtime"]

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


def decide(leave_pinned: Setting, pipeline: Setting) -> Decision:
    """The matrix cell for these two settings."""
    return _MATRIX[leave_pinned][pipeline]
