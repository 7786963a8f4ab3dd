"""Tests that neither the load mode nor the interpreter changes, run once per tox matrix.

``make test`` runs the whole suite in several interpreter and load-mode
factors; a test whose subject is the same in all of them (a launcher's
behaviour, a reproduction's race) runs in :data:`ONCE_PER_MATRIX_ENV`
only. Run outside tox, or in any other environment (``mpich``, ``ucm-*``),
such a test always runs.
"""

from __future__ import annotations

import os
import re

import pytest

__all__ = ["ONCE_PER_MATRIX_ENV", "elsewhere_in_matrix", "once_per_matrix"]

#: The factor that runs them: the oldest interpreter, static mode (``make test`` always runs it).
ONCE_PER_MATRIX_ENV = "py310-static"

_SUITE_FACTOR = re.compile(r"py3\d+-(static|dso)")


def elsewhere_in_matrix() -> str | None:
    """Why this run leaves such a test to another factor of the matrix (None: run it here)."""
    running_in = os.environ.get("TOX_ENV_NAME")
    if running_in is None or not _SUITE_FACTOR.fullmatch(running_in):
        return None
    if running_in == ONCE_PER_MATRIX_ENV:
        return None
    return f"under tox this runs once per matrix, in {ONCE_PER_MATRIX_ENV}"


def once_per_matrix() -> pytest.MarkDecorator:
    """A mark that skips the test where :func:`elsewhere_in_matrix` says so."""
    reason = elsewhere_in_matrix()
    return pytest.mark.skipif(reason is not None, reason=reason or "")
