"""Shared machinery of coverage() and self_test(): observe real releases.

Events are only ever taken from the ring through the dispatcher (with a
temporary subscriber), so measuring never steals events from the
application's own subscribers.
"""

from __future__ import annotations

import bisect
import contextlib
import threading
from collections.abc import Collection, Iterable, Iterator, Sequence

import attrs

from ._backend import HookBackend
from ._dispatch import ReleaseDispatcher
from ._errors import NativeUnavailable, PatchRefused
from ._events import OVERFLOW_KIND, UCM_KIND
from ._sites import PatchSite
from ._ucm import ucm_source


@attrs.frozen(slots=True)
class Observed:
    """A release callback invocation, as recorded by a :class:`Collector`."""

    address: int
    length: int
    kind: str
    from_alloc: bool

    def overlaps(self, start: int, end: int) -> bool:
        return start < self.address + self.length and self.address < end


class Collector:
    """A thread-safe release callback that remembers what it was told."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._seen: list[Observed] = []

    def __call__(self, address: int, length: int, kind: str, from_alloc: bool) -> None:
        with self._lock:
            self._seen.append(Observed(address, length, kind, from_alloc))

    def mark(self) -> int:
        with self._lock:
            return len(self._seen)

    def since(self, mark: int) -> list[Observed]:
        with self._lock:
            return self._seen[mark:]


def _matches(kind: str, kinds: Collection[str]) -> bool:
    # ucm does not say which call released the range: its event stands for any.
    return kind in kinds or kind == UCM_KIND


class Measure:
    """Bracket a release and ask whether its event arrived."""

    def __init__(self, dispatch: ReleaseDispatcher, collector: Collector, strict: bool) -> None:
        self._dispatch = dispatch
        self._collector = collector
        self._strict = strict
        self._mark = collector.mark()

    def begin(self) -> None:
        """Forget everything seen so far."""
        self._dispatch.drain()
        self._mark = self._collector.mark()

    def seen(
        self,
        ranges: Iterable[tuple[int, int]],
        kinds: Collection[str],
        accept_overflow: bool | None = None,
    ) -> tuple[str, ...]:
        """Kinds of the events since :meth:`begin` that overlap ``ranges``.

        An overflow notification tells every consumer to drop everything, so
        it counts as catching the release unless the measure is strict (or
        ``accept_overflow`` is False): a self-test wants the event itself.
        """
        if accept_overflow is None:
            accept_overflow = not self._strict
        self._dispatch.drain()
        wanted = list(ranges)
        found: list[str] = []
        for event in self._collector.since(self._mark):
            if event.kind == OVERFLOW_KIND:
                if accept_overflow:
                    found.append(event.kind)
            elif _matches(event.kind, kinds) and any(event.overlaps(s, e) for s, e in wanted):
                found.append(event.kind)
        return tuple(dict.fromkeys(found))

    def overflowed(self) -> bool:
        """Whether events were lost since :meth:`begin` (a probe may then be retried)."""
        self._dispatch.drain()
        return any(event.kind == OVERFLOW_KIND for event in self._collector.since(self._mark))

    def seen_containing(self, addresses: Sequence[int], kinds: Collection[str]) -> tuple[str, ...]:
        """Kinds of the events since :meth:`begin` containing any of ``addresses`` (sorted)."""
        self._dispatch.drain()
        found: list[str] = []
        for event in self._collector.since(self._mark):
            if _matches(event.kind, kinds):
                first = bisect.bisect_left(addresses, event.address)
                if first < len(addresses) and addresses[first] < event.address + event.length:
                    found.append(event.kind)
        return tuple(dict.fromkeys(found))


@contextlib.contextmanager
def observing(dispatch: ReleaseDispatcher, strict: bool = False) -> Iterator[Measure]:
    """Subscribe a temporary collector for the duration of the block."""
    collector = Collector()
    subscription = dispatch.subscribe(collector)
    try:
        yield Measure(dispatch, collector, strict)
    finally:
        subscription.unregister()


@contextlib.contextmanager
def hooks_installed(hooks: HookBackend) -> Iterator[dict[str, str]]:
    """Install (and afterwards restore) whatever is not installed yet.

    Yields each symbol's status: ``"installed"``, ``"installed for this run"``
    or ``"refused: <why>"``.  The enabled flag is forced on during the block
    and put back afterwards, so the process is left as it was found.
    """
    status: dict[str, str] = {}
    installed_here: list[PatchSite] = []
    was_enabled = hooks.enabled
    try:
        for symbol in hooks.symbols:
            if hooks.is_installed(symbol):
                status[symbol] = "installed"
                continue
            try:
                installed_here.append(hooks.install(symbol))
                status[symbol] = "installed for this run"
            except PatchRefused as refused:
                status[symbol] = f"refused: {refused}"
        hooks.set_enabled(True)
        yield status
    finally:
        hooks.set_enabled(was_enabled)
        for site in reversed(installed_here):
            hooks.restore(site)


@contextlib.contextmanager
def ucm_for_refused(status: dict[str, str]) -> Iterator[str]:
    """Subscribe to UCX's ucm for the block when own patches were refused and ucm is loaded.

    Yields how ucm takes part: a description, or why it does not.
    """
    source = ucm_source()
    state = source.status()
    if not any(value.startswith("refused") for value in status.values()):
        yield f"not needed ({state.describe()})"
        return
    if not state.loaded:
        yield f"unavailable ({state.describe()})"
        return
    try:
        path = source.acquire()
    except NativeUnavailable as exc:
        yield f"unavailable: {exc}"
        return
    try:
        yield f"subscribed to VM_UNMAPPED of {path}"
    finally:
        source.release()


def describe_sources(status: dict[str, str], ucm_state: str) -> dict[str, str]:
    """``coverage().sources``: which functions pmca's own patches hold, and ucm's part."""
    own = [symbol for symbol, value in status.items() if value.startswith("installed")]
    refused = [symbol for symbol, value in status.items() if not value.startswith("installed")]
    text = f"on {', '.join(own)}" if own else "none"
    if refused:
        text += f" (refused: {', '.join(refused)})"
    return {"own patches": text, "ucm": ucm_state}
