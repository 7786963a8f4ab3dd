"""Point-to-point messages between the ranks of a session's world.

See docs/architecture.md, section 5.4.

``s.p2p.send(dest, tag, buf)``, ``s.p2p.recv(source, tag, buf)``,
``s.p2p.isend``/``irecv`` returning :class:`Request`; ``probe``/``iprobe``
and the matched ``mprobe``/``improbe`` (a :class:`Message`);
:func:`wait_any`, :func:`wait_all`, :func:`test_any`, :func:`test_all`.
Buffers are any C-contiguous buffer-protocol object. Tags are
``0..TAG_UB``; receives and probes also take :data:`ANY_SOURCE` and
:data:`ANY_TAG`, matched by MPI's rules.
"""

from __future__ import annotations

from ._engine import P2p
from ._leaving import FinalizeWarning
from ._matching import ANY_SOURCE, ANY_TAG, TAG_UB
from ._probing import Message
from ._requests import Request, Status, TruncationError
from ._waiting import test_all, test_any, wait_all, wait_any

__all__ = [
    "ANY_SOURCE",
    "ANY_TAG",
    "TAG_UB",
    "FinalizeWarning",
    "Message",
    "P2p",
    "Request",
    "Status",
    "TruncationError",
    "test_all",
    "test_any",
    "wait_all",
    "wait_any",
]
