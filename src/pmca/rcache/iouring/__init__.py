"""An rcache backend whose registrations really pin pages: io_uring registered buffers.

``IoUringBackend.register`` puts a range into a slot of the ring's sparse
registered-buffer table (``IORING_REGISTER_BUFFERS_UPDATE``); the kernel pins
the pages behind it, as ``ibv_reg_mr`` does.  ``write_fixed`` and
``send_zc`` then move what those pinned pages hold, whatever the address maps
now, so a registration that outlives its memory sends stale bytes: exactly
the hazard a registration cache must prevent.  Needs Linux >= 5.19 with
io_uring enabled (``kernel.io_uring_disabled`` = 0).
"""

from __future__ import annotations

import errno
import threading

from ._ring import Ring

__all__ = ["IoUringBackend", "Ring", "unavailable_reason"]


def unavailable_reason() -> str | None:
    """Why io_uring registered buffers cannot be used here, or None."""
    try:
        ring = Ring(table_size=1)
    except OSError as exc:
        return f"io_uring with a sparse registered-buffer table is unavailable: {exc}"
    ring.close()
    return None


class IoUringBackend:
    """A :class:`pmca.rcache.Backend`: handles are slot numbers of one ring's buffer table.

    :param table_size: how many registrations can be alive at once (the
        kernel allows up to 16384); a full table raises ``OSError(ENOSPC)``,
        which makes grdma evict an unused registration and retry.
    """

    def __init__(self, *, table_size: int = 1024) -> None:
        self.ring = Ring(table_size=table_size)
        self._lock = threading.Lock()
        self._free = list(range(table_size - 1, -1, -1))
        self._ranges: dict[int, tuple[int, int]] = {}

    def register(self, base: int, size: int) -> int:
        with self._lock:
            if not self._free:
                raise OSError(errno.ENOSPC, "io_uring registered-buffer table is full")
            index = self._free.pop()
        try:
            self.ring.register(index, base, size)
        except BaseException:
            with self._lock:
                self._free.append(index)
            raise
        with self._lock:
            self._ranges[index] = (base, size)
        return index

    def deregister(self, handle: int) -> None:
        self.ring.unregister(handle)
        with self._lock:
            del self._ranges[handle]
            self._free.append(handle)

    def registered(self) -> dict[int, tuple[int, int]]:
        """Live slots and the ``(base, size)`` each pins."""
        with self._lock:
            return dict(self._ranges)

    def write_fixed(self, fd: int, address: int, length: int, handle: int) -> int:
        """Write ``length`` bytes at ``address`` (inside registration ``handle``) to ``fd``."""
        return self.ring.write_fixed(fd, address, length, handle)

    def send_zc(self, fd: int, address: int, length: int, handle: int, flags: int = 0) -> int:
        """Zero-copy send on socket ``fd`` from registration ``handle``."""
        return self.ring.send_zc(fd, address, length, handle, flags)

    def close(self) -> None:
        """Unpin everything (closing the ring drops every registered buffer)."""
        self.ring.close()
