"""What pmca knows about UCX's ucm, for ``pmca doctor`` and the memory components.

Imported by the first :meth:`UcmSource.status <pmca.native.UcmSource.status>`:
a session in a process without UCX never builds it.
"""

from __future__ import annotations

import attrs

from .._public import public
from .._records import FrozenValue
from ._errors import NOTHING_TO_LOAD

__all__ = ["UcmStatus"]


@public
@attrs.frozen(eq=False, repr=False)
class UcmStatus(FrozenValue):
    """What pmca knows about UCX's ucm in this process."""

    loaded: bool
    path: str | None
    subscribed: bool
    events: int
    loadable: str | None  # a libucs pmca could load, when none is loaded

    def describe(self) -> str:
        if self.subscribed:
            return f"subscribed to VM_UNMAPPED of {self.path} ({self.events} events so far)"
        if self.loaded:
            return f"loaded ({self.path}), not subscribed"
        if self.loadable:
            return f"not loaded; loadable from {self.loadable}"
        return NOTHING_TO_LOAD
