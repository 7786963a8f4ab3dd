"""Point-to-point messages between the ranks of a session's world.

See docs/architecture.md, section 5.4.

``s.p2p.send(dest, tag, buf)``, ``s.p2p.recv(source, tag, buf)``,
``s.p2p.isend``/``irecv`` returning :class:`Request`. Buffers are any
C-contiguous buffer-protocol object.
"""

from __future__ import annotations

from ._engine import P2p
from ._requests import Request, TruncationError

__all__ = ["P2p", "Request", "TruncationError"]
