"""Seed scenario 4: the stale registration (2009 OpenFabrics thread).

An RDMA registration pins the physical pages behind a virtual range and
hands the NIC a key for them.  A registration cache keeps that key after
the user is done, keyed by address.  If the user frees buffer A and the
memory goes back to the OS, and buffer B is later mapped at the same
address, a cache that never heard of the release finds A's registration for
B's address, and the NIC sends A's (still pinned) pages: wrong data, no
error anywhere.

The emulation is faithful where it matters: buffers are shared mappings of
their own memfd, and "pinning" maps the same pages a second time, so the
registration keeps A's pages alive and readable after A is unmapped,
exactly as a pinned MR does.  The "NIC" reads through the registration,
never through the user's address.  B is mapped at A's address with
``MAP_FIXED_NOREPLACE`` (it never clobbers anything).

``no hooks`` runs with ``memory_patcher_disable`` (``register_release``
refuses, so the cache cannot invalidate); ``pmca hooks`` subscribes a
callback that only records released ranges; the cache drains and applies
them at its next lookup and frees invalidated registrations afterwards
(deferred, never inside the callback).
"""

from __future__ import annotations

import ctypes
import os
import threading

from attrs import define

from .._libc import MAP_FIXED_NOREPLACE, MAP_SHARED, PROT_READ, PROT_WRITE
from ._common import emit, run_child, skipped_without_native
from ._result import ScenarioResult

SCENARIO = "stale-registration"


class _Mapper:
    """mmap/munmap of file descriptors through libc's (possibly patched) entry points."""

    def __init__(self) -> None:
        from .._libc import libc

        self._libc = libc()

    def map(self, fd: int, length: int, *, prot: int, at: int = 0) -> int:
        flags = MAP_SHARED | (MAP_FIXED_NOREPLACE if at else 0)
        return self._libc.mmap(at, length, prot, flags, fd)

    def unmap(self, address: int, length: int) -> None:
        if self._libc.munmap(address, length) != 0:
            errno = ctypes.get_errno()
            raise OSError(errno, f"munmap failed: {os.strerror(errno)}")


@define
class Buffer:
    """A user buffer: a shared mapping of its own memfd (the memfd is its physical pages)."""

    address: int
    length: int
    fd: int


@define
class Registration:
    """What the NIC holds: a key and the pinned pages (a second mapping of them)."""

    key: int
    address: int
    length: int
    pinned: int  # where this process can read the pinned pages, as the NIC would DMA them

    def read(self) -> bytes:
        """What the NIC sends through this registration."""
        return ctypes.string_at(self.pinned, self.length)


class Memory:
    """Allocates buffers and pins them; knows which pages back which address (the kernel)."""

    def __init__(self) -> None:
        self._mapper = _Mapper()
        self._backing: dict[int, Buffer] = {}

    def allocate(self, length: int, fill: bytes, *, at: int = 0) -> Buffer:
        fd = os.memfd_create("pmca-stale-registration")
        os.ftruncate(fd, length)
        address = self._mapper.map(fd, length, prot=PROT_READ | PROT_WRITE, at=at)
        ctypes.memmove(address, fill * (length // len(fill)), length)
        buffer = Buffer(address, length, fd)
        self._backing[address] = buffer
        return buffer

    def free(self, buffer: Buffer) -> None:
        """Return the buffer to the OS (munmap); pinned pages stay alive in registrations."""
        del self._backing[buffer.address]
        self._mapper.unmap(buffer.address, buffer.length)
        os.close(buffer.fd)

    def pin(self, key: int, address: int, length: int) -> Registration:
        """Pin the pages that back ``address`` now (ibv_reg_mr)."""
        buffer = self._backing[address]
        pinned = self._mapper.map(buffer.fd, length, prot=PROT_READ)
        return Registration(key, address, length, pinned)

    def unpin(self, registration: Registration) -> None:
        self._mapper.unmap(registration.pinned, registration.length)


class RegistrationCache:
    """Registrations by address range, with deferred invalidation.

    The release callback only records ranges; :meth:`lookup` drains pending
    events, applies them, frees what they invalidated, then searches.
    """

    def __init__(self, memory: Memory) -> None:
        self._memory = memory
        self._registrations: list[Registration] = []
        self._pending: list[tuple[int, int]] = []
        self._pending_lock = threading.Lock()
        self._next_key = 1
        self.hooked = False
        self.invalidated: list[int] = []

    def on_release(self, address: int, length: int, kind: str, from_alloc: bool) -> None:
        with self._pending_lock:
            self._pending.append((address, address + length))

    def _apply_invalidations(self) -> None:
        if self.hooked:
            from .. import memory

            memory.drain()  # every release that happened before this lookup is now pending
        with self._pending_lock:
            pending, self._pending = self._pending, []
        garbage = [
            r
            for r in self._registrations
            if any(start < r.address + r.length and r.address < end for start, end in pending)
        ]
        for registration in garbage:
            self._registrations.remove(registration)
            self.invalidated.append(registration.key)
        for registration in garbage:  # freed outside any callback, at the next operation
            self._memory.unpin(registration)

    def lookup(self, address: int, length: int) -> Registration:
        """A registration covering ``[address, address + length)``, from the cache or new."""
        self._apply_invalidations()
        for registration in self._registrations:
            if registration.address <= address and address + length <= (
                registration.address + registration.length
            ):
                return registration
        registration = self._memory.pin(self._next_key, address, length)
        self._next_key += 1
        self._registrations.append(registration)
        return registration


LENGTH = 16 * 4096


def _child(variant: str) -> None:
    """Entry point of a child process: register A, free it, map B there, send B."""
    from .. import memory as hooks
    from ..runtime import Session

    mca = {"memory_patcher_disable": variant == "no-hooks"}
    with Session(mca=mca, frameworks=["memory"]):
        memory = Memory()
        cache = RegistrationCache(memory)
        why = ""
        try:
            handle = hooks.register_release(cache.on_release)
            cache.hooked = True
        except hooks.MemoryHooksUnavailable as exc:
            why = str(exc)
        a = memory.allocate(LENGTH, b"A")
        first = cache.lookup(a.address, a.length)
        sane = first.read() == b"A" * LENGTH
        memory.free(a)
        try:
            b = memory.allocate(LENGTH, b"B", at=a.address)
        except OSError as exc:
            emit({"error": f"could not map B at A's address {a.address:#x}: {exc}"})
            return
        sent = cache.lookup(b.address, b.length)
        data = sent.read()
        if cache.hooked:
            handle.unregister()
    emit(
        {
            "hooked": cache.hooked,
            "why": why,
            "sane": sane,
            "same_address": b.address == a.address,
            "first_key": first.key,
            "sent_key": sent.key,
            "invalidated": cache.invalidated,
            "correct": data == b"B" * LENGTH,
            "sent_prefix": data[:4].decode(errors="replace"),
        }
    )


def _describe(p: dict[str, object]) -> str:
    return (
        f"B at A's address, lookup returned key {p['sent_key']} "
        f"(A's was {p['first_key']}), sent {p['sent_prefix']!r}... "
        f"{'(B, correct)' if p['correct'] else 'instead of BBBB... (A, stale)'}"
    )


def _variant(variant: str, label: str, *, timeout: float) -> ScenarioResult:
    child = run_child(__name__, "_child", variant, hang_after=timeout)
    if not child.completed or child.payload is None:
        return ScenarioResult(SCENARIO, label, "failed", child.describe_failure())
    p = child.payload
    if "error" in p:
        return ScenarioResult(SCENARIO, label, "failed", str(p["error"]))
    if not (p["sane"] and p["same_address"]):
        return ScenarioResult(SCENARIO, label, "failed", "setup went wrong: " + _describe(p))
    if variant == "no-hooks":
        if p["hooked"]:
            return ScenarioResult(SCENARIO, label, "failed", "hooks were installed anyway")
        if p["correct"]:
            return ScenarioResult(SCENARIO, label, "failed", "no stale data: " + _describe(p))
        return ScenarioResult(SCENARIO, label, "reproduced", _describe(p))
    if not p["hooked"]:
        return ScenarioResult(SCENARIO, label, "failed", f"no hooks: {p['why']}")
    if p["correct"] and p["first_key"] in p["invalidated"]:
        return ScenarioResult(
            SCENARIO,
            label,
            "prevented",
            f"A's release invalidated key {p['first_key']}; " + _describe(p),
        )
    return ScenarioResult(SCENARIO, label, "failed", _describe(p))


def run(*, timeout: float = 30.0) -> list[ScenarioResult]:
    """Run the cache without hooks (stale data) and with pmca's hooks (correct data)."""
    skipped = skipped_without_native(SCENARIO)
    if skipped is not None:
        return skipped
    return [
        _variant("no-hooks", "no hooks (memory_patcher_disable)", timeout=timeout),
        _variant("hooks", "pmca hooks (deferred invalidation)", timeout=timeout),
    ]
