"""Errors of the command line itself."""

from __future__ import annotations


class UsageError(Exception):
    """Bad input on the command line: reported on stderr, exit code 2, no traceback."""
