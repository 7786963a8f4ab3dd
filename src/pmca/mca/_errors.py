"""Errors raised by the component architecture.

Every error names what was wrong and where it came from, because the person
reading it is usually a component author looking at one line of output from
one rank out of many.
"""

from __future__ import annotations


class PmcaError(Exception):
    """Base class of every error pmca raises on purpose."""


class FrameworkError(PmcaError):
    """A framework could not be declared, found, opened or closed."""


class SelectionError(PmcaError, ValueError):
    """A framework selection parameter is malformed or names no component."""


class ComponentError(PmcaError):
    """A component is malformed: wrong type, name, framework or API version."""


class NotAvailable(PmcaError):
    """Raised (or signalled by returning ``False``) from ``open``: drop me silently."""


class SessionError(PmcaError):
    """A session handle was used in a state that does not allow it."""


class StaleReferenceError(PmcaError):
    """A pmca module still refers to an object of a component that was closed."""


class LibraryError(PmcaError):
    """A native library could not be loaded or unloaded through pmca's loader."""
