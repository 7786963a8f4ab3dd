"""self_test(): prove each installed hook really delivers its events."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Literal

from .._interrupts import deferred_interrupts
from .._libc import PAGE, Libc, libc
from .._public import public
from ._backend import HookBackend, backend
from ._coverage import (
    NotRunnable,
    PathOutcome,
    direct_madvise,
    direct_mremap,
    direct_munmap,
    mmap_fixed,
    shmdt,
)
from ._dispatch import dispatcher
from ._measure import Measure, observing
from ._ucm import ucm_source

Source = Literal["patches", "ucm"]


def _reached(hooks: HookBackend, symbol: str, call: Callable[[], object]) -> bool:
    before = hooks.calls(symbol)
    call()
    return hooks.calls(symbol) > before


def _brk_probe(hooks: HookBackend, c: Libc, m: Measure) -> bool:
    # A shrinking brk cannot be made safely while other threads may be
    # inside malloc, so brk is proven by reaching the hook with brk(0),
    # which moves nothing; the shrink logic is covered by the test suite.
    return _reached(hooks, "brk", lambda: c.brk(0))


def _shmdt_probe(hooks: HookBackend, c: Libc, m: Measure) -> bool:
    try:
        return bool(shmdt(c, m)[0])
    except NotRunnable:
        # No SysV IPC here: shmdt() of a non-segment fails with EINVAL but
        # still shows whether libc's entry leads to our hook.
        region = c.map_anonymous(PAGE)
        try:
            return _reached(hooks, "shmdt", lambda: c.shmdt(region))
        finally:
            c.munmap(region, PAGE)


def _event_probe(
    path: Callable[[Libc, Measure], PathOutcome],
) -> Callable[[HookBackend, Libc, Measure], bool]:
    def probe(hooks: HookBackend, c: Libc, m: Measure) -> bool:
        return bool(path(c, m)[0])

    return probe


_PROBES: dict[str, Callable[[HookBackend, Libc, Measure], bool]] = {
    "munmap": _event_probe(direct_munmap),
    "madvise": _event_probe(direct_madvise),
    "mremap": _event_probe(direct_mremap),
    "mmap": _event_probe(mmap_fixed),
    "shmdt": _shmdt_probe,
    "brk": _brk_probe,
}


def _ucm_brk_probe(hooks: HookBackend, c: Libc, m: Measure) -> bool:
    # brk(0) releases nothing, so no VM_UNMAPPED can prove the brk hook:
    # ask ucm's own test whether its brk hook is reached.
    return ucm_source().brk_reached()


def _ready(hooks: HookBackend, symbol: str, source: Source) -> bool:
    if not hooks.enabled:
        return False
    if source == "ucm":
        return ucm_source().subscribed
    return hooks.is_installed(symbol)


#: Probes lost to an overflow (other threads filling the ring) are run again
#: this many times in all before the symbol is reported as not delivering.
ATTEMPTS = 5


def _probe(probe: Callable[[], bool], measure: Measure) -> bool:
    # Each probe releases memory it mapped itself and looks for an event on
    # exactly that range, so other threads' releases cannot be mistaken for
    # it; only losing it to an overflow can hide it, and then it is retried.
    for _ in range(ATTEMPTS):
        if probe():
            return True
        if not measure.overflowed():
            return False
    return False


@public
def self_test(
    symbols: Iterable[str] | None = None, *, source: Source = "patches"
) -> dict[str, bool]:
    """Call each hooked function for real and check that its event arrives.

    ``source="patches"`` tests pmca's own patches: a symbol that is not
    installed (or whose patch was overwritten by someone else) is reported
    False without being called.  ``source="ucm"`` runs the same probes with
    the events coming from UCX's ucm (pmca must be subscribed), except brk,
    which ucm's own test proves.  Events are observed through the
    dispatcher, so no subscriber loses any; other threads' releases cannot
    make it fail (see ``_probe()``).
    """
    with deferred_interrupts():  # its probes create segments and subscriptions
        return _self_test(symbols, source)


def _self_test(symbols: Iterable[str] | None, source: Source) -> dict[str, bool]:
    hooks = backend()
    chosen = tuple(hooks.symbols if symbols is None else symbols)
    unknown = [symbol for symbol in chosen if symbol not in _PROBES]
    if unknown:
        raise ValueError(f"cannot self-test {', '.join(unknown)}: not hookable")
    c = libc()
    results: dict[str, bool] = {}
    with observing(dispatcher(), strict=True) as measure:
        for symbol in chosen:
            if not _ready(hooks, symbol, source):
                results[symbol] = False
                continue
            probe = _ucm_brk_probe if source == "ucm" and symbol == "brk" else _PROBES[symbol]
            try:
                results[symbol] = _probe(lambda: probe(hooks, c, measure), measure)  # noqa: B023
            except OSError:
                results[symbol] = False
    return results
