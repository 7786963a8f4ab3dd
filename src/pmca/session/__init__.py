"""Sessions: what composes the frameworks.

A :class:`pmca.Session` opens frameworks on the shared runtime
(:mod:`pmca.runtime`, below every framework), builds its btl data path
(modex, bml, p2p), takes an active-message tag, and at interpreter exit
restores libc's patches. It sits above every framework and above
:mod:`pmca.p2p`; nothing below imports it.
"""

from __future__ import annotations

from ._handle import FrameworkHandle
from ._session import Session

__all__ = ["FrameworkHandle", "Session"]
