"""A toy registration cache kept coherent by batched release callbacks.

    python examples/release_cache.py

The pattern every cache should follow:

* the callback only *records* what was released (a list append under a lock
  that is never held around ``drain()``);
* before every lookup the cache calls ``pmca.memory.drain()`` -- which
  returns only once every release that happened before it was delivered --
  then applies the recorded ranges under its own lock;
* ``batch.overflow`` (events were lost) means "drop everything".
"""

from __future__ import annotations

import mmap
import threading

import pmca
from pmca.native import ReleaseBatch


class RegistrationCache:
    def __init__(self) -> None:
        self._lock = threading.Lock()  # the cache's own lock: never held around drain()
        self._pending_lock = threading.Lock()  # held only for an append or a swap
        self._pending: list[tuple[list[int], list[int]]] = []
        self._flush_all = False
        self._entries: dict[int, int] = {}  # base -> length
        self.invalidated = 0

    def on_release(self, batch: ReleaseBatch) -> None:
        # No lookups, no cache lock: copy the columns (valid only during the call).
        with self._pending_lock:
            if batch.overflow:
                self._flush_all = True
            self._pending.append((batch.addresses.tolist(), batch.lengths.tolist()))

    def _apply_releases(self) -> None:
        pmca.memory.drain()
        with self._pending_lock:
            pending, self._pending = self._pending, []
            flush, self._flush_all = self._flush_all, False
        if flush:
            self.invalidated += len(self._entries)
            self._entries.clear()
        for addresses, lengths in pending:
            for address, length in zip(addresses, lengths, strict=True):
                for base, size in list(self._entries.items()):
                    if base < address + length and address < base + size:
                        del self._entries[base]
                        self.invalidated += 1

    def register(self, base: int, length: int) -> None:
        self._apply_releases()
        with self._lock:
            self._entries[base] = length

    def lookup(self, base: int) -> bool:
        self._apply_releases()
        with self._lock:
            return base in self._entries


def mapped_address(region: mmap.mmap) -> int:
    import ctypes

    view = (ctypes.c_char * 1).from_buffer(region)
    try:
        return ctypes.addressof(view)
    finally:
        del view


def main() -> None:
    if not pmca.native.available():
        print(f"release_cache: skipped ({pmca.native.unavailable_reason()})")
        return
    cache = RegistrationCache()
    with pmca.Session(frameworks=["memory"]):
        handle = pmca.memory.register_release(cache.on_release, batch=True)
        region = mmap.mmap(-1, 1 << 20)
        base = mapped_address(region)
        cache.register(base, 1 << 20)
        assert cache.lookup(base), "a live registration must be found"
        region.close()  # munmap: the hook publishes the event before the kernel unmaps
        assert not cache.lookup(base), "a released registration must never be found"
        handle.unregister()
    stats = pmca.native.stats()
    print(f"release_cache: OK ({cache.invalidated} invalidated; {stats.delivered} delivered)")


if __name__ == "__main__":
    main()
