"""The bml (Open MPI's bml/r2): per peer, which btl modules reach it and in what order."""

from __future__ import annotations

from ._bml import Bml, BmlPeer, Route, connect

__all__ = ["Bml", "BmlPeer", "Route", "connect"]
