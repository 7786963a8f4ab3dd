"""Python-side fan-out of release events to subscribers.

Events leave the native ring only here: synchronously in :meth:`drain`
(the registration cache calls it before every lookup) and from a daemon
listener thread.  Subscribers always run in Python, never inside a hook and
never under the dispatcher's lock, so they may allocate, free, subscribe and
unsubscribe.

Guarantees:

* **Complete drains.**  :meth:`ReleaseDispatcher.drain` snapshots the ring's
  producer position when it begins and returns only after every event
  published before that point was delivered to every active subscriber, or
  announced to it by an overflow notice (events lost to a full ring, or a
  producer stalled mid-publish past the bound, see
  :data:`~pmca.native._backend.STALL_WAIT_NS`).
* **Order and serialization.**  One subscriber's callback never runs on two
  threads at once, and sees events in the order they were published.
  Concurrent drains never deliver an event twice to a subscriber; each
  delivers at most what was queued when its own pull ended.
* **Epochs.**  A subscriber never receives an event published before it
  subscribed; in particular a new session's subscribers never see what the
  previous session released.
* **Nothing silent.**  Unsubscribing, closing and finalizing deliver what is
  pending first.

The rule that keeps this deadlock-free: **a release callback must not block
on a lock that a thread may hold while it calls drain(), unregister() or
close()** (those calls wait for callbacks running on other threads).  A
registration cache records the released ranges in its callback (a list
append, or a lock that is never held around ``drain()``) and applies them
under its own lock after ``drain()`` returns.  ``drain()`` called from inside
a release callback never waits for another thread's callback: it delivers
what it can and leaves the rest to the thread already delivering.

Wake-ups: the listener sleeps in a native futex wait (the GIL released) and
wakes when the ring passes a fill threshold or a short timer fires, never
once per event; hooks never write to a file descriptor.
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Callable
from typing import Final

from .._public import public
from ._backend import STALL_WAIT_NS, HookBackend, backend
from ._subscription import (
    AnyCallback,
    BatchCallback,
    Chunk,
    Counters,
    ReleaseCallback,
    Subscription,
    delivering,
    mark_listener_thread,
    report_failure,
    take_deferred,
)
from ._watch import check_overwrites

HealthCheck = Callable[[], object]

#: Events per pull from the ring.
CHUNK: Final = 4096
#: The listener's timer: shortest and longest sleep.  It backs off while the
#: ring stays empty (an idle process is not woken 50 times a second) and
#: snaps back as soon as a wake-up finds events.
TIMER_MIN: Final = 0.02
TIMER_MAX: Final = 0.25
#: drain() runs the health checks at most this often (the listener runs them
#: on every wake-up).
CHECK_PERIOD: Final = 0.1
#: A subscriber whose backlog falls this many seconds behind the ring gets one
#: overflow notice instead of the backlog (see Subscription._deliver_until).
MAX_LAG: Final = 1.0


@public
class ReleaseDispatcher:
    """Delivers native release events to Python subscribers.

    Use the process-wide instance from :func:`dispatcher`.  ``listen=False``
    makes one that never starts a listener thread (benchmarks, tests): its
    subscribers are served by :meth:`drain` only.
    """

    def __init__(
        self,
        hooks: Callable[[], HookBackend] = backend,
        *,
        listen: bool = True,
        stall_wait_ns: int = STALL_WAIT_NS,
        max_lag: float = MAX_LAG,
    ) -> None:
        self._hooks = hooks
        self._cached_backend: HookBackend | None = None
        self._max_lag = max_lag
        self._listen_enabled = listen
        self._stall_wait_ns = stall_wait_ns
        self.counters = Counters()
        self._checks: list[HealthCheck] = []
        self._reset_state()

    def _backend(self) -> HookBackend:
        hooks = self._cached_backend
        if hooks is None:
            hooks = self._cached_backend = self._hooks()
        return hooks

    def _reset_state(self) -> None:
        # One lock for ring consumption and the subscriber list: a pull and a
        # subscription never interleave, which is what makes epochs exact.
        self._lock = threading.Lock()
        self._subscriptions: list[Subscription] = []
        # Ring position and drop count up to which events were handed to the
        # subscribers' queues (written under the lock, after the hand-over).
        self._offered_to = 0
        self._drops_offered = -1
        self._listener: threading.Thread | None = None
        self._stop = threading.Event()
        self._last_check = 0.0
        self.drains = 0
        self.listener_wakeups = 0
        self.listener_errors = 0
        self.check_errors = 0

    # -- subscribing ---------------------------------------------------------------

    def subscribe(self, callback: AnyCallback, *, batch: bool = False) -> Subscription:
        """Deliver every release published from now on to ``callback``.

        Per event, ``callback(address, length, kind, from_alloc)``; with
        ``batch=True``, ``callback(batch)`` with a :class:`ReleaseBatch` per
        chunk of events (no Python object per event).  Starts the listener
        thread with the first subscriber; if it cannot start, nothing stays
        subscribed.  Raises :class:`NativeUnavailable` without a native backend.
        """
        hooks = self._backend()
        hooks.ensure_ring()  # before anyone is stamped with a ring position
        with self._lock:
            epoch, dropped = hooks.snapshot()
            subscription = Subscription(
                self, callback, batch, epoch, dropped, self.counters, self._max_lag
            )
            self._subscriptions.append(subscription)
            try:
                self._ensure_listener_locked()
            except BaseException:
                self._subscriptions.remove(subscription)
                subscription.retire()
                raise
        return subscription

    def subscribe_batch(self, callback: BatchCallback) -> Subscription:
        """``subscribe(callback, batch=True)``."""
        return self.subscribe(callback, batch=True)

    def _remove(self, subscription: Subscription) -> None:
        hooks = self._backend()
        with self._lock:
            if not subscription.active:
                return
            self._pull_locked(hooks)
            self._subscriptions.remove(subscription)
            ticket = subscription.retire()
            stopping = None if self._subscriptions else self._detach_listener_locked()
        subscription.pump(ticket, block=not delivering())
        if stopping is not None:
            self._join(stopping)
        self._raise_deferred()

    @property
    def subscriber_count(self) -> int:
        with self._lock:
            return len(self._subscriptions)

    @property
    def listening(self) -> bool:
        """Whether the listener thread is running."""
        with self._lock:
            return self._listener is not None and self._listener.is_alive()

    def close(self) -> None:
        """Deliver what is pending, unregister every subscriber, stop the listener."""
        hooks = self._backend()
        with self._lock:
            self._pull_locked(hooks)
            retiring = [(s, s.retire()) for s in self._subscriptions]
            self._subscriptions.clear()
            stopping = self._detach_listener_locked()
        block = not delivering()
        for subscription, ticket in retiring:
            subscription.pump(ticket, block)
        if stopping is not None:
            self._join(stopping)
        self._raise_deferred()

    # -- health checks ---------------------------------------------------------------

    def add_check(self, check: HealthCheck) -> Callable[[], None]:
        """Run ``check()`` periodically: on every listener wake-up, and from
        drain() at most every ``CHECK_PERIOD`` seconds.

        For event sources that must verify they are still in place (another
        library re-patching libc, for one).  A check may publish events or
        raise (reported, counted).  Returns the function that removes it.
        """
        with self._lock:
            self._checks.append(check)

        def remove() -> None:
            with self._lock:
                if check in self._checks:
                    self._checks.remove(check)

        return remove

    def run_checks(self) -> None:
        with self._lock:
            checks = list(self._checks)
            self._last_check = time.monotonic()
        for check in checks:
            try:
                check()
            except Exception as exc:
                self.check_errors += 1
                report_failure(check, exc, "release health check")

    # -- draining ------------------------------------------------------------------

    def drain(self) -> int:
        """Deliver everything published before this call; returns how many events it pulled.

        Lost events are announced to per-event subscribers as one
        ``(0, END_OF_MEMORY, "overflow", True)`` call, and to batch
        subscribers by ``batch.overflow``.  Called from inside a release
        callback, it does not wait for other threads' callbacks.
        """
        hooks = self._backend()
        # Before anything else: a hook someone overwrote counts a drop, so
        # this very drain reports an overflow (the listener's timer drains too).
        check_overwrites()
        if (
            hooks.head_word.value <= self._offered_to
            and hooks.dropped_word.value == self._drops_offered
            and (not self._checks or time.monotonic() - self._last_check < CHECK_PERIOD)
            and all(s.caught_up() for s in tuple(self._subscriptions))  # a copy: atomic
        ):
            # Nothing published, lost or queued since the last hand-over: the
            # common case of a drain before a cache lookup, without the lock.
            return 0
        with self._lock:
            self.drains += 1
            pulled = self._pull_locked(hooks)
            tickets = [(s, s.ticket()) for s in self._subscriptions]
            run_checks = bool(self._checks) and (
                time.monotonic() - self._last_check >= CHECK_PERIOD
            )
        block = not delivering()
        for subscription, ticket in tickets:
            subscription.pump(ticket, block)
        if run_checks and block:
            self.run_checks()
        self._raise_deferred()
        return pulled

    def _pull_locked(self, hooks: HookBackend) -> int:
        """Move every event published so far into the subscribers' queues.

        Bounded: the producer position is fixed when the call begins, so
        producers that keep publishing cannot keep it going.
        """
        until, dropped = hooks.snapshot()
        if hooks.pulled_to >= until and dropped == hooks.drops_seen:
            self._offered_to, self._drops_offered = until, dropped
            return 0
        pulled = 0
        while True:
            taken = hooks.pull(until, CHUNK, self._stall_wait_ns)
            if taken.count or taken.dropped:
                chunk = Chunk(
                    taken.data, taken.first, taken.count, taken.dropped > 0, taken.dropped_total
                )
                for subscription in self._subscriptions:
                    subscription.offer(chunk)
            pulled += taken.count
            if taken.next_position >= until or (taken.count == 0 and taken.abandoned == 0):
                self._offered_to = max(self._offered_to, taken.next_position)
                self._drops_offered = taken.dropped_total
                return pulled

    @staticmethod
    def _raise_deferred() -> None:
        if delivering():
            return
        pending = take_deferred()
        if pending is not None:
            raise pending

    # -- listener thread -----------------------------------------------------------

    def _ensure_listener_locked(self) -> None:
        if not self._listen_enabled:
            return
        if self._listener is not None and self._listener.is_alive():
            return
        stop = threading.Event()
        listener = threading.Thread(
            target=self._listen, args=(stop,), name="pmca-release-listener", daemon=True
        )
        listener.start()  # may raise: the caller undoes its subscription
        self._stop, self._listener = stop, listener

    def _detach_listener_locked(self) -> threading.Thread | None:
        listener, self._listener = self._listener, None
        if listener is None:
            return None
        self._stop.set()
        self._backend().wake_listeners()
        return listener

    @staticmethod
    def _join(listener: threading.Thread) -> None:
        # From inside a callback, the listener may itself be waiting for the
        # callback this thread is in: let it exit on its own.
        if listener is threading.current_thread() or delivering():
            return
        listener.join()

    def _listen(self, stop: threading.Event) -> None:
        mark_listener_thread()
        hooks = self._backend()
        capacity = hooks.ensure_ring()
        timer = TIMER_MIN
        while not stop.is_set():
            try:
                found = self.drain()
                self.run_checks()
            except BaseException as exc:  # the listener outlives anything
                self.listener_errors += 1
                report_failure(self._listen, exc, "release listener")
                found = 0
            if stop.is_set():
                break
            timer = TIMER_MIN if found else min(timer * 2, TIMER_MAX)
            # A quarter of the ring: room for four times what arrives while
            # the listener waits for the GIL after being woken.
            hooks.wait(capacity // 4, timer)  # the GIL is released
            self.listener_wakeups += 1

    # -- fork ----------------------------------------------------------------------

    def _after_fork_in_child(self) -> None:
        # Only the forking thread exists in the child: locks held by others
        # would never be released, and the listener is gone.  Subscribers
        # and what they have queued stay (the child's memory is a copy of the
        # parent's, so those releases concern it too).
        subscriptions = [s for s in self._subscriptions if s.active]
        self._reset_state()
        self.counters.lock = threading.Lock()
        for subscription in subscriptions:
            subscription.reset_after_fork()
        self._subscriptions = subscriptions
        if subscriptions:
            try:
                with self._lock:
                    self._ensure_listener_locked()
            except RuntimeError:
                pass  # drain() still delivers; the next subscribe() retries


_dispatcher_lock = threading.Lock()
_dispatcher: ReleaseDispatcher | None = None


@public
def dispatcher() -> ReleaseDispatcher:
    """The process-wide release dispatcher."""
    global _dispatcher
    with _dispatcher_lock:
        if _dispatcher is None:
            _dispatcher = ReleaseDispatcher()
        return _dispatcher


def _reset_after_fork() -> None:
    global _dispatcher_lock
    _dispatcher_lock = threading.Lock()
    if _dispatcher is not None:
        _dispatcher._after_fork_in_child()


os.register_at_fork(after_in_child=_reset_after_fork)

__all__ = [
    "BatchCallback",
    "HealthCheck",
    "ReleaseCallback",
    "ReleaseDispatcher",
    "Subscription",
    "dispatcher",
]
