"""One subscriber of the release dispatcher: its queue, its epoch, its delivery.

Each subscription owns a queue of chunks pulled from the ring and a lock
that is held while its callback runs, so one subscriber's callback never
runs on two threads at once and sees events in ring order.  Whoever needs
the queue delivered (a ``drain()`` caller, the listener, ``unregister()``)
takes that lock and delivers up to its *ticket*: the queue length when its
own pull finished.  Nobody delivers more than its ticket (no take-over
storms), and nobody returns before its ticket is reached, except a thread
that is itself inside a release callback, which only asks ("kicks") the
current holder to go on (see :meth:`Subscription.pump`).
"""

from __future__ import annotations

import collections
import itertools
import operator
import threading
import time
import warnings
from collections.abc import Callable, Iterable
from typing import Final, Protocol

from .._public import public
from ._events import END_OF_MEMORY, OVERFLOW_KIND, RECORD_SIZE, FastColumns, ReleaseBatch
from ._events import decode_fast as _decode

ReleaseCallback = Callable[[int, int, str, bool], object]
BatchCallback = Callable[[ReleaseBatch], object]
AnyCallback = ReleaseCallback | BatchCallback

# Runs an iterator to its end in C (a deque that keeps nothing).
_exhaust: Final[Callable[[Iterable[object]], None]] = collections.deque[object](maxlen=0).extend
#: Per-event callbacks are called this many at a time between checks of the
#: subscriber's lag (a few ns per event).
WINDOW: Final = 256

_local = threading.local()


def delivering() -> set[Subscription]:
    """The subscriptions whose callbacks are on this thread's stack."""
    current: set[Subscription] | None = getattr(_local, "delivering", None)
    if current is None:
        current = _local.delivering = set()
    return current


def mark_listener_thread() -> None:
    _local.listener = True


def on_listener_thread() -> bool:
    """Whether this is the dispatcher's listener thread (pmca's own, not a caller's)."""
    return bool(getattr(_local, "listener", False))


def take_deferred() -> BaseException | None:
    """A KeyboardInterrupt/SystemExit a callback raised on this thread, to re-raise now."""
    pending: BaseException | None = getattr(_local, "deferred", None)
    _local.deferred = None
    return pending


class Chunk:
    """Consecutive events pulled from the ring, shared by every subscriber's queue.

    ``overflow`` says that events were lost before these (``dropped_total``
    is the drop counter when they were pulled).
    """

    __slots__ = ("_columns", "count", "data", "dropped_total", "first", "overflow", "pulled_at")

    def __init__(
        self, data: memoryview, first: int, count: int, overflow: bool, dropped_total: int
    ) -> None:
        self.pulled_at = time.monotonic()
        self.data = data
        self.first = first
        self.count = count
        self.overflow = overflow
        self.dropped_total = dropped_total
        self._columns: FastColumns | None = None

    def columns(self, start: int) -> FastColumns:
        # Decoded once for all per-event subscribers; a race decodes twice, harmlessly.
        columns = self._columns
        if columns is None:
            columns = self._columns = _decode(self.data)
        if start == 0:
            return columns
        addresses, lengths, kinds, allocs = columns
        return (
            addresses[start:],
            lengths[start:] if isinstance(lengths, list) else lengths,
            kinds[start:] if isinstance(kinds, list) else kinds,
            allocs[start:] if isinstance(allocs, list) else allocs,
        )


class Counters:
    """Dispatcher-wide delivery counters (exact: updated under one lock, per chunk)."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.delivered = 0
        self.overflows = 0
        self.callback_errors = 0
        self.lagged = 0

    def add(self, delivered: int, overflows: int, errors: int, lagged: int = 0) -> None:
        with self.lock:
            self.delivered += delivered
            self.overflows += overflows
            self.callback_errors += errors
            self.lagged += lagged


def report_failure(callback: object, exc: BaseException, where: str = "release callback") -> None:
    """Report a callback's exception with its own traceback; delivery goes on."""
    import traceback  # when a callback fails, not in every session

    details = "".join(traceback.format_exception(type(exc), exc, exc.__traceback__))
    warnings.warn(
        f"pmca {where} {callback!r} raised {type(exc).__name__}: {exc}\n{details}",
        RuntimeWarning,
        stacklevel=2,
    )


@public
class Subscription:
    """A registered callback; :meth:`unregister` is idempotent.

    ``epoch`` is the ring position it subscribed at: it receives exactly the
    events published from there on (or an overflow notice for lost ones).
    """

    __slots__ = (
        "__weakref__",
        "_active",
        "_batch",
        "_callback",
        "_counters",
        "_delivered_items",
        "_dispatcher",
        "_drops_base",
        "_enqueued",
        "_kicked",
        "_lock",
        "_max_lag",
        "_queue",
        "delivered",
        "epoch",
        "errors",
        "lagged",
        "overflows",
    )

    def __init__(
        self,
        dispatcher: _Remover,
        callback: AnyCallback,
        batch: bool,
        epoch: int,
        drops_base: int,
        counters: Counters,
        max_lag: float,
    ) -> None:
        self._dispatcher = dispatcher
        self._callback = callback
        self._batch = batch
        self._active = True
        self._counters = counters
        self._max_lag = max_lag
        self.epoch = epoch
        self._drops_base = drops_base
        self._queue: collections.deque[tuple[Chunk, int, bool]] = collections.deque()
        self._enqueued = 0
        self._delivered_items = 0
        self._kicked = False
        self._lock = threading.Lock()
        self.delivered = 0
        self.overflows = 0
        self.errors = 0
        self.lagged = 0

    @property
    def callback(self) -> AnyCallback:
        return self._callback

    @property
    def batch(self) -> bool:
        """Whether the callback takes a :class:`ReleaseBatch` per call."""
        return self._batch

    @property
    def active(self) -> bool:
        return self._active

    def unregister(self) -> None:
        """Stop delivering to this callback, after delivering what is pending.

        Events published before this call are delivered first (or announced
        by an overflow notice).  From inside a release callback, they are
        delivered by the thread already delivering to this subscriber.
        """
        self._dispatcher._remove(self)

    def __repr__(self) -> str:
        state = "active" if self._active else "unregistered"
        return f"<Subscription {self._callback!r} {state}>"

    # -- queue (dispatcher lock held) ------------------------------------------

    def offer(self, chunk: Chunk) -> None:
        overflow = chunk.overflow and chunk.dropped_total > self._drops_base
        start = min(max(self.epoch - chunk.first, 0), chunk.count)
        if start == chunk.count and not overflow:
            return
        self._queue.append((chunk, start, overflow))
        self._enqueued += 1

    def caught_up(self) -> bool:
        """Whether everything queued has been delivered (read without locks)."""
        return self._delivered_items >= self._enqueued

    def ticket(self) -> int:
        return self._enqueued

    def retire(self) -> int:
        """Stop receiving chunks; returns the ticket that covers everything queued."""
        self._active = False
        return self._enqueued

    def reset_after_fork(self) -> None:
        self._lock = threading.Lock()
        self._kicked = False

    # -- delivery --------------------------------------------------------------

    def pump(self, ticket: int, block: bool) -> None:
        """Make sure everything queued up to ``ticket`` has been delivered.

        ``block=False`` (from inside a release callback, where waiting for
        another subscriber's callback could deadlock) delivers only if nobody
        else is delivering to this subscriber; otherwise it kicks the current
        holder, which goes on to the end of the queue before it lets go.
        """
        mine = delivering()
        if self in mine:  # inside our own callback: the delivery up the stack goes on
            self._kicked = True
            return
        while True:
            if self._delivered_items >= ticket and not self._kicked:
                return
            if not self._lock.acquire(blocking=block):
                self._kicked = True
                # The holder checks the kick after releasing: either it sees it,
                # or the lock is free by now.
                if not self._lock.acquire(blocking=False):
                    return
            mine.add(self)
            try:
                while True:
                    self._deliver_until(ticket)
                    if not self._kicked:
                        break
                    self._kicked = False
                    ticket = max(ticket, self._enqueued)
            finally:
                mine.discard(self)
                self._lock.release()
            if not self._kick_pending():
                return
            block = False

    def _kick_pending(self) -> bool:
        # A method, not the attribute: another thread may have set it after
        # this thread cleared it (static analysis would assume it still false).
        return self._kicked

    def _deliver_until(self, ticket: int) -> None:
        """Deliver the queue up to ``ticket``; a backlog that falls more than
        ``max_lag`` seconds behind the ring is replaced by one overflow notice
        (what the ring itself would have done had it been that far behind):
        a callback that releases more memory than the event it handles would
        otherwise make every drain longer than the last."""
        queue = self._queue
        # Lag counts from when the events were pulled, or from when this
        # delivery began if that is later: time spent on other subscribers'
        # callbacks in the same drain is not this subscriber's lag.
        began = time.monotonic()
        while self._delivered_items < ticket:
            chunk, start, overflow = queue[0]
            deadline = max(chunk.pulled_at, began) + self._max_lag
            if time.monotonic() > deadline:
                self._collapse(ticket)
                return
            delivered, errors, complete = self._deliver(chunk, start, overflow, deadline)
            queue.popleft()
            self._delivered_items += 1
            self.delivered += delivered
            self.overflows += overflow
            self.errors += errors
            self._counters.add(delivered, int(overflow), errors, chunk.count - start - delivered)
            if not complete:
                self.lagged += chunk.count - start - delivered
                self._collapse(ticket)
                return

    def _collapse(self, ticket: int) -> None:
        skipped = 0
        while self._delivered_items < ticket:
            chunk, start, _ = self._queue.popleft()
            self._delivered_items += 1
            skipped += chunk.count - start
        errors = self._notify_overflow()
        self.lagged += skipped
        self.overflows += 1
        self.errors += errors
        self._counters.add(0, 1, errors, skipped)

    def _notify_overflow(self) -> int:
        try:
            if self._batch:
                self._callback(ReleaseBatch(memoryview(b""), True))  # type: ignore[call-arg, arg-type]
            else:
                self._callback(0, END_OF_MEMORY, OVERFLOW_KIND, True)  # type: ignore[call-arg, arg-type]
        except BaseException as exc:
            self._failed(exc)
            return 1
        return 0

    def _deliver(
        self, chunk: Chunk, start: int, overflow: bool, deadline: float
    ) -> tuple[int, int, bool]:
        """Deliver one queue item: (events delivered, callback errors, complete)."""
        count = chunk.count - start
        if self._batch:
            batch = ReleaseBatch(chunk.data[start * RECORD_SIZE :], overflow)
            try:
                self._callback(batch)  # type: ignore[call-arg, arg-type]
            except BaseException as exc:
                self._failed(exc)
                return count, 1, True
            return count, 0, True
        errors = self._notify_overflow() if overflow else 0
        if count <= 0:
            return 0, errors, True
        delivered, failures, complete = self._call_each(chunk.columns(start), deadline)
        return delivered, errors + failures, complete

    def _call_each(self, columns: FastColumns, deadline: float) -> tuple[int, int, bool]:
        """One callback call per event, driven by C (map) rather than a Python loop,
        a window at a time; stops early once past ``deadline``."""
        callback = self._callback
        addresses, lengths, kinds, allocs = columns
        same_length = itertools.repeat(lengths) if isinstance(lengths, int) else None
        same_kind = itertools.repeat(kinds) if isinstance(kinds, str) else None
        same_alloc = itertools.repeat(allocs) if isinstance(allocs, bool) else None
        total = len(addresses)
        begin = 0
        errors = 0
        while begin < total:
            end = min(total, begin + WINDOW)
            cursor = iter(addresses[begin:end])
            calls = map(
                callback,  # type: ignore[arg-type]
                cursor,
                same_length or lengths[begin:end],  # type: ignore[index]
                same_kind or kinds[begin:end],
                same_alloc or allocs[begin:end],  # type: ignore[index]
            )
            try:
                _exhaust(calls)
                begin = end
            except BaseException as exc:
                # map took one address per call made: the failing event is the last taken.
                begin = end - operator.length_hint(cursor)
                errors += 1
                self._failed(exc)
            if begin < total and time.monotonic() > deadline:
                return begin, errors, False
        return total, errors, True

    def _failed(self, exc: BaseException) -> None:
        report_failure(self._callback, exc)
        # KeyboardInterrupt or SystemExit on a drain() caller: re-raised once
        # the drain has met its obligations to every subscriber.
        if (
            not isinstance(exc, Exception)
            and not getattr(_local, "listener", False)
            and getattr(_local, "deferred", None) is None
        ):
            _local.deferred = exc


class _Remover(Protocol):
    """What a subscription needs from its dispatcher."""

    def _remove(self, subscription: Subscription) -> None: ...
