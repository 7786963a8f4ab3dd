"""The pluggy markers shared by every pmca framework."""

from __future__ import annotations

import pluggy

PROJECT = "pmca"

#: Marks a hook specification on a framework's interface class.
#:
#: A framework's hooks are called on its selected components in selection
#: order, highest priority first (Open MPI calls its modules so): a list
#: result holds the best component's answer first, and a
#: ``firstresult=True`` hook answers with the best component's first
#: non-``None`` result. pluggy's ``tryfirst``/``trylast`` on an
#: implementation still move it to the front/back; components that were not
#: selected are never called.
hookspec = pluggy.HookspecMarker(PROJECT)

#: Marks a component method as the implementation of a hook.
hookimpl = pluggy.HookimplMarker(PROJECT)
