"""``MSG_ZEROCOPY`` bookkeeping for one socket: what the kernel may still read.

A send with ``MSG_ZEROCOPY`` returns before the kernel has read the bytes:
it pins the pages and reads them when the segments leave (on a rate-limited
link, long after), and says so later with a notice on the socket's error
queue naming a range of send ids (one id per send call that sent anything,
counted from 0 per socket). Until that notice, every byte of that call must
stay as it was: the frame header as much as the body. So the buffers of each
such call are held here, under their id, until the notice for it arrives;
dropping them earlier lets Python reuse their memory while the kernel still
reads it, and the peer gets a corrupted stream.

The notice also says whether the kernel copied after all
(``SO_EE_CODE_ZEROCOPY_COPIED``: a link without scatter-gather, a peer on
this host or in another network namespace of it). Zero-copy there costs
pinning and notices for nothing, so in ``auto`` mode the connection stops
asking for it, as the kernel's documentation advises.
"""

from __future__ import annotations

import socket

from attrs import define

from ..._records import Record

MSG_ZEROCOPY = 0x4000000
SO_ZEROCOPY = 60
_SO_EE_ORIGIN_ZEROCOPY = 5
_SO_EE_CODE_ZEROCOPY_COPIED = 1
_ID_MODULUS = 1 << 32
#: Buffers of connections closed while the kernel may still read them: never
#: released, so their memory is never reused under a transmission (bounded by
#: what a socket's send buffer holds, and only after a peer failed).
_KEPT_FOREVER: list[list[memoryview]] = []


@define(eq=False, repr=False)
class ZeroCopyStats(Record):
    """What one socket's zero-copy sends did (for reports, tests and pvars)."""

    #: Send calls made with MSG_ZEROCOPY that sent something.
    sends: int = 0
    #: Of those, how many the kernel has reported done.
    completions: int = 0
    #: Of the completed, how many the kernel copied after all.
    copied: int = 0

    def add(self, other: ZeroCopyStats) -> None:
        self.sends += other.sends
        self.completions += other.completions
        self.copied += other.copied


class ZeroCopy:
    """The zero-copy state of one socket: whether to ask, and what is still in flight."""

    def __init__(self, sock: socket.socket, *, wanted: bool, adaptive: bool) -> None:
        self.sock = sock
        #: Stop asking once the kernel reports it copied anyway (``auto`` mode).
        self.adaptive = adaptive
        self.enabled = wanted and self._switch_on()
        self.stats = ZeroCopyStats()
        self._next_id = 0
        self._held: dict[int, list[memoryview]] = {}

    def _switch_on(self) -> bool:
        try:
            self.sock.setsockopt(socket.SOL_SOCKET, SO_ZEROCOPY, 1)
        except OSError:
            return False
        return True

    @property
    def pending(self) -> int:
        """Send calls whose buffers the kernel may still read."""
        return len(self._held)

    def sent(self, buffers: list[memoryview]) -> None:
        """Hold ``buffers`` (a zero-copy send call that sent something) until completed."""
        self._held[self._next_id] = list(buffers)
        self._next_id = (self._next_id + 1) % _ID_MODULUS
        self.stats.sends += 1

    def out_of_memory(self) -> None:
        """The kernel refused a zero-copy send (ENOBUFS): plain sends from now on."""
        self.enabled = False

    def reap(self) -> None:
        """Consume the completion notices waiting on the error queue."""
        while self._held:
            try:
                _, ancillary, _, _ = self.sock.recvmsg(0, 256, socket.MSG_ERRQUEUE)
            except (BlockingIOError, InterruptedError):
                return
            except OSError:
                return  # a closed or failed socket: close() decides what to keep
            for _level, _type, data in ancillary:
                self._completed(data)

    def _completed(self, data: bytes) -> None:
        # struct sock_extended_err: errno u32, origin u8, type u8, code u8, pad u8,
        # info u32 (first id), data u32 (last id).
        if len(data) < 16 or data[4] != _SO_EE_ORIGIN_ZEROCOPY:
            return
        low = int.from_bytes(data[8:12], "little")
        high = int.from_bytes(data[12:16], "little")
        count = (high - low) % _ID_MODULUS + 1
        for offset in range(count):
            if self._held.pop((low + offset) % _ID_MODULUS, None) is not None:
                self.stats.completions += 1
                if data[6] == _SO_EE_CODE_ZEROCOPY_COPIED:
                    self.stats.copied += 1
        if data[6] == _SO_EE_CODE_ZEROCOPY_COPIED and self.adaptive:
            self.enabled = False

    def release(self) -> None:
        """The socket closes: keep for good whatever the kernel may still read."""
        if self._held:
            _KEPT_FOREVER.extend(self._held.values())
            self._held.clear()


__all__ = ["MSG_ZEROCOPY", "ZeroCopy", "ZeroCopyStats"]
