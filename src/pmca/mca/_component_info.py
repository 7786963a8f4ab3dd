"""What ``Session.components()`` reports; built when asked, not by every session."""

from __future__ import annotations

from attrs import frozen

from .._public import public
from .._records import FrozenValue
from ._loader import LoadMode

__all__ = ["ComponentInfo"]


@public
@frozen(eq=False, repr=False)
class ComponentInfo(FrozenValue):
    """What :meth:`pmca.Session.components` reports for one component."""

    framework: str
    name: str
    version: str
    api_version: str
    load_mode: LoadMode
    location: str
    distribution: str | None
    priority: int | None
    selected: bool
