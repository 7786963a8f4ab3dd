"""The pluggy markers shared by every pmca framework."""

from __future__ import annotations

import pluggy

PROJECT = "pmca"

#: Marks a hook specification on a framework's interface class.
hookspec = pluggy.HookspecMarker(PROJECT)

#: Marks a component method as the implementation of a hook.
hookimpl = pluggy.HookimplMarker(PROJECT)
