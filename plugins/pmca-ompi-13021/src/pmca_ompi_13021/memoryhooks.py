"""Open MPI's ``opal/memoryhooks`` support level: a process-wide global.

Set once by memory/patcher's ``patcher_open`` and never cleared, so after a
session that installed hooks every later session claims the same support,
whether or not its hooks are in place.
"""

from __future__ import annotations

from pmca.memory import Support

#: ``hooks_support`` in ``opal/memoryhooks/memory.c``.
hooks_support: Support = Support.NONE


def opal_mem_hooks_set_support(support: Support) -> None:
    """Record what the installed hooks catch."""
    global hooks_support
    hooks_support = support


def opal_mem_hooks_support_level() -> Support:
    """What the hooks are believed to catch."""
    return hooks_support
