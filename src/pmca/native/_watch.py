"""Overwrite detection: notice when someone wrote over the hooks pmca relies on.

:func:`check_overwrites` is cheap (one native call comparing a few bytes per
function) and runs at the start of every dispatcher drain, which the
listener also runs when its timer fires.  When pmca's own jump was
overwritten, or the prologues a ucm subscription relies on changed, the
native side has already made the next drain report an overflow (every
registration invalid); the watchers registered here then decide what
delivers events from now on.
"""

from __future__ import annotations

import ctypes
import os
import threading
import warnings
from collections.abc import Callable
from typing import Any

import attrs

from .._public import public
from .._records import FrozenValue
from . import _abi
from ._abi import SYMBOLS
from ._backend import backend
from ._foreign import ForeignPatch, foreign_patches

_GUARD_BIT = 1 << len(SYMBOLS)


@public
@attrs.frozen(eq=False, repr=False)
class Overwrite(FrozenValue):
    """What one check found changed."""

    #: pmca's own patches that someone wrote over (they are orphaned now).
    symbols: tuple[str, ...]
    #: The prologues guarded for the ucm subscription changed.
    guarded_changed: bool
    #: Who holds each release function now (foreign jumps only).
    foreign: dict[str, ForeignPatch]

    def describe(self) -> str:
        parts = []
        if self.symbols:
            owners = sorted({self.foreign[s].owner for s in self.symbols if s in self.foreign})
            by = f" by {', '.join(owners)}" if owners else ""
            parts.append(f"pmca's patches of {', '.join(self.symbols)} were overwritten{by}")
        if self.guarded_changed:
            parts.append("the libc prologues UCX's ucm hooks live in changed")
        return "; ".join(parts)


Watcher = Callable[[Overwrite], object]

_lock = threading.Lock()
_watchers: list[Watcher] = []
#: Overwrites of pmca's patches noticed in this process (the pvar reads it).
_detected = [0]


@public
def overwrites_detected() -> int:
    """How many times an overwrite of pmca's patches was noticed in this process."""
    return _detected[0]


class _Checking(threading.local):
    active = False  # a class default: no AttributeError on the hot path


_checking = _Checking()
# Readers that must see the state after a reaction (wait=True) wait here
# while the native "pending" word says another thread is still reacting.
_reaction = threading.Condition()

#: How long a waiting reader gives a reaction in another thread.
REACTION_WAIT = 30.0


class _Native:
    """The check function and the pending word, resolved once: this runs
    before every drain, and _abi.load() takes a lock."""

    def __init__(self) -> None:
        lib = _abi.load()
        self.check: Callable[[], int] = lib.pmca_hooks_check_overwrites
        self.handled: Callable[[int], None] = lib.pmca_hooks_overwrite_handled
        self.pending = lib.pmca_hooks_overwrite_pending().contents


_native: list[_Native] = []


def _resolved() -> _Native:
    if not _native:
        _native.append(_Native())
    return _native[0]


@public
def on_overwrite(watcher: Watcher) -> Callable[[], None]:
    """Call ``watcher(Overwrite)`` after every check that finds a change; returns a remover."""
    with _lock:
        _watchers.append(watcher)

    def remove() -> None:
        with _lock:
            if watcher in _watchers:
                _watchers.remove(watcher)

    return remove


@public
def check_overwrites(*, wait: bool = False) -> Overwrite | None:
    """Compare the hooks' bytes with what they should be; report and react to changes.

    Returns what changed, or None.  The thread that finds a change runs the
    watchers; another thread asking meanwhile gets None at once, or with
    ``wait=True`` waits until the reaction is over (at most
    ``REACTION_WAIT`` seconds), so that what a ``support_level()`` reads
    next is the new state.  Re-entrant calls (a watcher that drains) return
    None at once.
    """
    if _checking.active:
        return None
    native = _native[0] if _native else _resolved()
    mask = int(native.check())
    if mask:
        return overwrites_found(mask)
    if wait and native.pending.value:
        with _reaction:
            _reaction.wait_for(lambda: not native.pending.value, timeout=REACTION_WAIT)
    return None


@public
def check_address() -> int:
    """Where the native check is (``uint32_t (*)(void)``), for native code that runs
    it on a hot path of its own; a nonzero result goes to :func:`overwrites_found`."""
    function: Any = _resolved().check  # a ctypes function pointer
    address = ctypes.cast(function, ctypes.c_void_p).value
    assert address is not None
    return address


@public
def overwrites_found(mask: int) -> Overwrite:
    """React to the change the native check reported as ``mask`` (run the watchers)."""
    native = _native[0] if _native else _resolved()
    try:
        return _react(mask)
    finally:
        with _reaction:
            native.handled(0)
            _reaction.notify_all()


def _react(mask: int) -> Overwrite:
    _detected[0] += 1
    symbols = tuple(s for i, s in enumerate(SYMBOLS) if mask & (1 << i))
    overwrite = Overwrite(
        symbols=symbols,
        guarded_changed=bool(mask & _GUARD_BIT),
        foreign=foreign_patches(backend()),
    )
    with _lock:
        watchers = list(_watchers)
    _checking.active = True
    try:
        for watcher in watchers:
            try:
                watcher(overwrite)
            except Exception as exc:  # one watcher must not stop the others
                warnings.warn(
                    f"pmca overwrite watcher {watcher!r} raised {type(exc).__name__}: {exc}",
                    RuntimeWarning,
                    stacklevel=2,
                )
    finally:
        _checking.active = False
    return overwrite


def _reset_after_fork() -> None:
    # Only the forking thread exists in the child: a reaction under way in
    # another thread will never finish there.
    global _lock, _reaction
    _lock = threading.Lock()
    _reaction = threading.Condition()
    if _native:
        _native[0].handled(1)


os.register_at_fork(after_in_child=_reset_after_fork)
