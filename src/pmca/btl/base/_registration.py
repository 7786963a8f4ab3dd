"""Memory registration for put/get: through the rcache when registrations may stay pinned.

With ``mpi_leave_pinned`` and working memory hooks, registrations go through
``pmca.rcache.create("grdma", backend)`` and stay cached after their last
use. Without hooks (for example under an MPI library whose own memory hooks
got there first) a cached registration could go stale, so every transfer
registers and deregisters its range (Open MPI's behaviour with leave_pinned
off).
"""

from __future__ import annotations

import itertools
import mmap
import threading
from typing import Any, Protocol, cast

from attrs import define

from ..._public import public
from ..._records import Record
from .._interface import BtlError, MemoryHandle

PAGE = mmap.PAGESIZE


@public
class Backend(Protocol):
    """Pins a page-aligned range with the transport (the rcache's backend protocol)."""

    def register(self, base: int, size: int) -> object: ...

    def deregister(self, handle: object) -> None: ...


@public
class NoPinBackend:
    """For transports that need no pinning: registration is bookkeeping only."""

    def register(self, base: int, size: int) -> object:
        return None

    def deregister(self, handle: object) -> None:
        return None


@define(eq=False, repr=False)
class _Plain(Record):
    """An uncached registration: what the rcache's registration looks like."""

    base: int
    bound: int
    handle: object


@public
def page_range(base: int, size: int) -> tuple[int, int]:
    """``(first page, length)`` covering ``[base, base + size)``."""
    first = base - base % PAGE
    last = base + max(size, 1)
    last += -last % PAGE
    return first, last - first


@public
def leave_pinned_wanted(params: Any) -> tuple[bool, str]:
    """Whether registrations may stay cached, and why (for the log)."""
    from ... import memory

    try:
        value = int(params.value("mpi_leave_pinned"))
    except Exception:
        return False, "mpi_leave_pinned is not registered (memory framework not open)"
    if value == 0:
        return False, "mpi_leave_pinned is false"
    support = memory.support_level()
    if not support & (memory.MUNMAP | memory.FREE):
        return False, "memory hooks are not installed, so a cached registration could go stale"
    return True, f"mpi_leave_pinned={value}, memory hooks catch {support!r}"


@public
class Registrations:
    """Registered ranges of one module, by the key peers send back in put/get."""

    def __init__(self, owner: str, backend: Backend, *, cached: bool, log: Any) -> None:
        self.owner = owner
        self._backend = backend
        self._lock = threading.Lock()
        self._ids = itertools.count(1)
        self._live: dict[int, tuple[int, int, object]] = {}
        self._cache: Any = None
        if cached:
            try:
                from ... import rcache

                self._cache = rcache.create("grdma", backend)
            except Exception as exc:
                log.info("no registration cache; registering per transfer", why=repr(exc))

    @property
    def cached(self) -> bool:
        return self._cache is not None

    def register(self, base: int, size: int, pack: Any) -> MemoryHandle:
        """Register ``[base, base + size)``; ``pack(key, base, size)`` makes the remote key."""
        first, length = page_range(base, size)
        if self._cache is not None:
            token: object = self._cache.register(first, length)
        else:
            token = _Plain(first, first + length, self._backend.register(first, length))
        with self._lock:
            key = next(self._ids)
            self._live[key] = (base, size, token)
        return MemoryHandle(base, size, pack(key, base, size), (key, token))

    def mark(self, base: int, size: int, key: int | None = None) -> int:
        """A registration that is bookkeeping only, for a backend that pins nothing
        and no cache: its key (``key``, from :meth:`reserve`, or a new one), which
        :meth:`check` accepts until :meth:`forget`.

        What a rendezvous of a few hundred KiB costs instead of
        :meth:`register`'s handle and token.
        """
        if self._cache is not None or not isinstance(self._backend, NoPinBackend):
            raise BtlError(f"btl {self.owner}: mark() is for registrations that pin nothing")
        with self._lock:
            if key is None:
                key = next(self._ids)
            self._live[key] = (base, size, None)
        return key

    def reserve(self) -> int:
        """A key no registration has, for a :meth:`mark` made once the range is known
        (a native call that reads the buffer's address also packs the key)."""
        with self._lock:
            return next(self._ids)

    def forget(self, key: int) -> None:
        """End a :meth:`mark` (a key already gone is ignored: ``release_all`` ran)."""
        with self._lock:
            self._live.pop(key, None)

    def deregister(self, handle: MemoryHandle) -> None:
        key, token = cast("tuple[int, object]", handle.token)
        with self._lock:
            if self._live.pop(key, None) is None:
                raise BtlError(f"btl {self.owner}: registration {key} deregistered twice")
        if self._cache is not None:
            self._cache.deregister(token)
        else:
            assert isinstance(token, _Plain)
            self._backend.deregister(token.handle)

    def check(self, key: int, address: int, size: int) -> None:
        """Raise unless ``[address, address + size)`` lies inside live registration ``key``."""
        with self._lock:
            entry = self._live.get(key)
        if entry is None:
            raise BtlError(f"btl {self.owner}: no live registration {key}")
        base, length, _ = entry
        if address < base or address + size > base + length:
            raise BtlError(
                f"btl {self.owner}: range [{address:#x}, +{size}) is outside registration "
                f"{key} [{base:#x}, +{length})"
            )

    def release_all(self) -> None:
        with self._lock:
            live, self._live = self._live, {}
        for _, _, token in live.values():
            if token is None:  # a mark(): nothing to undo
                continue
            if self._cache is not None:
                self._cache.deregister(token)
            elif isinstance(token, _Plain):
                self._backend.deregister(token.handle)

    def close(self) -> None:
        """Release everything, cached registrations included, while the transport
        that pinned them is still open; the registrations are unusable after."""
        self.release_all()
        cache, self._cache = self._cache, None
        if cache is not None:
            cache.close()

    def stats(self) -> Any:
        """The rcache's counters (``None`` when registrations are not cached)."""
        return self._cache.stats() if self._cache is not None else None
