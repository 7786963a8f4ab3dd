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

import os
import threading
import warnings
from collections.abc import Callable

import attrs

from . import _abi
from ._abi import SYMBOLS
from ._backend import backend
from ._foreign import ForeignPatch, foreign_patches

_GUARD_BIT = 1 << len(SYMBOLS)


@attrs.frozen
class Overwrite:
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
_checking = threading.local()
# Held from the native check until the watchers have reacted, so that a
# reader asking with wait=True never sees the state half switched.
_reaction = threading.Condition()
_reacting: list[int] = []  # the thread reacting now, if any

#: How long a waiting reader gives a reaction in another thread.
REACTION_WAIT = 30.0


_check_function: list[Callable[[], int]] = []


def _native_check() -> int:
    # Resolved once: this runs before every drain, and _abi.load() takes a lock.
    if not _check_function:
        _check_function.append(_abi.load().pmca_hooks_check_overwrites)
    return int(_check_function[0]())


def on_overwrite(watcher: Watcher) -> Callable[[], None]:
    """Call ``watcher(Overwrite)`` after every check that finds a change; returns a remover."""
    with _lock:
        _watchers.append(watcher)

    def remove() -> None:
        with _lock:
            if watcher in _watchers:
                _watchers.remove(watcher)

    return remove


def check_overwrites(*, wait: bool = False) -> Overwrite | None:
    """Compare the hooks' bytes with what they should be; report and react to changes.

    Returns what changed, or None.  While another thread's watchers are
    still reacting, returns None at once, or with ``wait=True`` waits until
    they are done (at most :data:`REACTION_WAIT` seconds): what a
    ``support_level()`` then reads is the new state.  Re-entrant calls (a
    watcher that drains) return None at once.
    """
    if getattr(_checking, "active", False):
        return None
    me = threading.get_ident()
    with _reaction:
        if _reacting and not wait:
            return None
        if not _reaction.wait_for(lambda: not _reacting, timeout=REACTION_WAIT):
            return None
        mask = _native_check()
        if not mask:
            return None
        _reacting.append(me)
    try:
        return _react(mask)
    finally:
        with _reaction:
            _reacting.clear()
            _reaction.notify_all()


def _react(mask: int) -> Overwrite:
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
    _reacting.clear()


os.register_at_fork(after_in_child=_reset_after_fork)
