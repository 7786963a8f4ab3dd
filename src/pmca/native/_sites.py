"""A live patch of a libc function, as the hook backend reports it.

Imported with the first patch installed or inspected: a session whose hooks
are never installed does not build it.
"""

from __future__ import annotations

import attrs

from .._public import public
from .._records import FrozenValue
from ._abi import SiteReport

__all__ = ["PatchSite", "site_from"]


@public
@attrs.frozen(eq=False, repr=False)
class PatchSite(FrozenValue):
    """One live redirection of a libc function to pmca's hook.

    ``original``/``patched`` are the bytes at ``patch_address`` (the function
    entry, or just after its ``endbr64``) before and after patching: the
    jump is exactly those two bytes.  The ``jmp rel32`` written into the
    linker padding at ``padding_address`` stays in place after a restore
    (a thread may still be about to execute it); it is never executed once
    the entry is restored.
    """

    symbol: str
    address: int
    original: bytes
    patched: bytes
    patch_address: int
    padding_address: int
    padding_original: bytes
    padding_patched: bytes
    trampoline: int
    hook: int


def site_from(symbol: str, report: SiteReport) -> PatchSite:
    replaced = report.replaced_length
    padding = report.padding_length
    return PatchSite(
        symbol=symbol,
        address=report.function,
        original=bytes(report.original[:replaced]),
        patched=bytes(report.patched[:replaced]),
        patch_address=report.patch_address,
        padding_address=report.padding_address,
        padding_original=bytes(report.padding_original[:padding]),
        padding_patched=bytes(report.padding_patched[:padding]),
        trampoline=report.trampoline,
        hook=report.hook,
    )
