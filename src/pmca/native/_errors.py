"""Exceptions of the native hook backend."""

from __future__ import annotations

from .._public import public

#: What :meth:`UcmSource.unreachable_reason <pmca.native.UcmSource.unreachable_reason>`
#: and :meth:`UcmStatus.describe <pmca.native.UcmStatus.describe>` say when UCX is
#: neither loaded nor found to load (here: the first needs no record built).
NOTHING_TO_LOAD = "not loaded, and no libucs found to load"


@public
class NativeUnavailable(RuntimeError):
    """The native hook backend cannot be used in this process; the message says why."""


@public
class PatchRefused(RuntimeError):
    """A libc function was not patched; names the symbol, address, bytes found and why."""

    def __init__(self, symbol: str, address: int, found: bytes, reason: str) -> None:
        self.symbol = symbol
        self.address = address
        self.found = found
        self.reason = reason
        where = f"{address:#x}" if address else "an unknown address"
        super().__init__(
            f"refusing to patch {symbol} at {where}: found bytes "
            f"[{found.hex(' ') or 'none'}]: {reason}"
        )
