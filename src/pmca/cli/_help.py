"""argparse's help formatters, sized without importing ``shutil``.

argparse makes a help formatter at every ``add_argument`` (to check the
metavar), and the formatter asks ``shutil.get_terminal_size()`` for its
width: that imported ``shutil`` (and with it ``bz2``, ``lzma`` and
``fnmatch``) into every ``pmca info``. These formatters find the width the
same way (``COLUMNS``, else the terminal of ``sys.__stdout__``, else 80)
without it.
"""

from __future__ import annotations

import argparse
import os
import sys

__all__ = ["HelpFormatter", "RawDescriptionHelpFormatter", "columns"]


def columns() -> int:
    """The terminal's width as ``shutil.get_terminal_size().columns`` gives it."""
    try:
        width = int(os.environ["COLUMNS"])
    except (KeyError, ValueError):
        width = 0
    if width <= 0:
        try:
            width = os.get_terminal_size(sys.__stdout__.fileno()).columns  # type: ignore[union-attr]
        except (AttributeError, ValueError, OSError):
            width = 0
    return width if width > 0 else 80


class HelpFormatter(argparse.HelpFormatter):
    """argparse's formatter, its default width taken by :func:`columns`."""

    def __init__(
        self,
        prog: str,
        indent_increment: int = 2,
        max_help_position: int = 24,
        width: int | None = None,
    ) -> None:
        # argparse's own default: the terminal's width less 2.
        super().__init__(
            prog, indent_increment, max_help_position, columns() - 2 if width is None else width
        )


class RawDescriptionHelpFormatter(HelpFormatter, argparse.RawDescriptionHelpFormatter):
    """argparse's raw-description formatter, sized as :class:`HelpFormatter`."""
