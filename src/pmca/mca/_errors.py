"""Errors raised by the component architecture.

Every error names what was wrong and where it came from, because the person
reading it is usually a component author looking at one line of output from
one rank out of many.
"""

from __future__ import annotations

import os
import sys
import warnings

from .._public import public


@public
class PmcaError(Exception):
    """Base class of every error pmca raises on purpose."""


@public
class FrameworkError(PmcaError):
    """A framework could not be declared, found, opened or closed."""


@public
class SelectionError(PmcaError, ValueError):
    """A framework selection parameter is malformed or names no component."""


@public
class ComponentError(PmcaError):
    """A component is malformed: wrong type, name, framework or API version."""


@public
class NotAvailable(PmcaError):
    """Raised (or signalled by returning ``False``) from ``open``: drop me silently."""


@public
class SessionError(PmcaError):
    """A session handle was used in a state that does not allow it."""


@public
class StaleReferenceError(PmcaError):
    """A pmca module still refers to an object of a component that was closed."""


@public
class LibraryError(PmcaError):
    """A native library could not be loaded or unloaded through pmca's loader."""


@public
class ComponentWarning(UserWarning):
    """Something about the installed components deserves attention (a shadowed duplicate)."""


_PACKAGE_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__))) + os.sep


def warn_user(warning: Warning) -> None:
    """Warn, attributed to the first caller outside pmca (the user's code)."""
    frame = sys._getframe(1)
    level = 2
    while frame.f_back is not None and _is_pmca(frame.f_code.co_filename):
        frame = frame.f_back
        level += 1
    warnings.warn(warning, stacklevel=level)


def _is_pmca(filename: str) -> bool:
    # "<pmca ...>": code pmca compiles itself (a pvar sweep)
    return filename.startswith("<pmca ") or os.path.abspath(filename).startswith(_PACKAGE_DIR)
