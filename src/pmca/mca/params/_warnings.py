"""Warnings of the parameter space, attributed to the code that registered or set."""

from __future__ import annotations

import os
import sys
import warnings

from ._errors import PmcaDeprecationWarning
from ._values import Origin


def warn_deprecated(old: str, new: str, origin: Origin) -> None:
    warn_from_caller(
        PmcaDeprecationWarning(
            f"MCA parameter {old!r} is deprecated; use {new!r} instead (value given in {origin})"
        )
    )


_PACKAGE_DIR = os.path.dirname(os.path.abspath(__file__)) + os.sep


def warn_from_caller(warning: Warning) -> None:
    """Warn, attributed to the first caller outside this package (the registering code)."""
    frame = sys._getframe(1)
    level = 2
    while frame.f_back is not None and _inside_package(frame.f_code.co_filename):
        frame = frame.f_back
        level += 1
    warnings.warn(warning, stacklevel=level)


def _inside_package(filename: str) -> bool:
    return os.path.abspath(filename).startswith(_PACKAGE_DIR)
