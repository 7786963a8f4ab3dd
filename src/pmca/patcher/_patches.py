"""What a patcher module reports: the patches it applied, what restoring them did.

Imported with the first patch (or when these types are named): a session
whose memory hooks are never installed does not build them.
"""

from __future__ import annotations

from attrs import frozen

from .._public import public
from .._records import FrozenValue

__all__ = ["PatchRecord", "RestoreOutcome"]


@public
@frozen(eq=False, repr=False)
class PatchRecord(FrozenValue):
    """One applied patch: which function, where, the bytes it replaced, and who asked."""

    symbol: str
    address: int
    original: bytes
    patched: bytes
    owner: str


@public
@frozen(eq=False, repr=False)
class RestoreOutcome(FrozenValue):
    """What restoring one patch did: ``restored`` is False when the bytes were no longer ours."""

    record: PatchRecord
    restored: bool
