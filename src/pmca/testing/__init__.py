"""Test support for component authors: pmca's pytest plugin and helpers."""

from __future__ import annotations

from ._distributions import make_distribution
from ._subprocess import run_python

__all__ = ["make_distribution", "run_python"]
