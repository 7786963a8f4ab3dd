"""Python-side fan-out of release events to subscribers.

Events leave the native ring only here: synchronously in :meth:`drain`
(the registration cache calls it before every lookup) and from a daemon
listener thread woken by the ring's eventfd.  Subscribers always run in
Python, never inside a hook, and never under the dispatcher's lock, so they
may allocate, free, subscribe and unsubscribe.

Guarantee: when :meth:`ReleaseDispatcher.drain` returns, every event that was
in the ring when it was called has been delivered to every subscriber, even
events another thread pulled but has not finished delivering.  Waiting for
that thread could deadlock (its subscriber may need a lock the caller
holds), so the caller takes over the rest of the other thread's batch
instead; the event the other thread is delivering at that moment is
delivered once more.  Subscribers must therefore be thread-safe and
tolerate an event twice; invalidating a range is naturally idempotent.
"""

from __future__ import annotations

import contextlib
import os
import select
import threading
import warnings
from collections.abc import Callable
from typing import Final

from ._backend import HookBackend, backend
from ._events import OVERFLOW_EVENT, ReleaseEvent
from ._watch import check_overwrites

ReleaseCallback = Callable[[int, int, str, bool], object]

_CHUNK: Final = 4096

# Per thread: how many drain() deliveries are on the stack (callbacks running).
_delivering = threading.local()


def _delivery_depth() -> int:
    depth: int = getattr(_delivering, "depth", 0)
    return depth


class Subscription:
    """A registered callback; :meth:`unregister` is idempotent."""

    __slots__ = ("_active", "_callback", "_dispatcher")

    def __init__(self, dispatcher: ReleaseDispatcher, callback: ReleaseCallback) -> None:
        self._dispatcher = dispatcher
        self._callback = callback
        self._active = True

    @property
    def callback(self) -> ReleaseCallback:
        return self._callback

    @property
    def active(self) -> bool:
        return self._active

    def unregister(self) -> None:
        """Stop delivering to this callback (a call already under way may finish)."""
        self._dispatcher._remove(self)

    def __repr__(self) -> str:
        state = "active" if self._active else "unregistered"
        return f"<Subscription {self._callback!r} {state}>"


class _Delivery:
    """A batch of events owed to one subscriber, being delivered by one thread.

    ``cursor`` is the event being delivered; ``limit`` may be lowered by a
    draining thread that takes the rest over (see the module docstring).
    """

    __slots__ = ("cursor", "events", "limit", "owner", "subscription")

    def __init__(
        self, events: tuple[ReleaseEvent, ...], subscription: Subscription, owner: int
    ) -> None:
        self.events = events
        self.subscription = subscription
        self.owner = owner
        self.cursor = 0
        self.limit = len(events)

    def take_over(self, owner: int) -> _Delivery | None:
        """Leave this delivery its current event and hand the rest to ``owner``."""
        start = self.cursor
        if start >= self.limit:
            return None
        self.limit = start + 1
        return _Delivery(self.events[start:], self.subscription, owner)


def _report_failure(callback: ReleaseCallback, exc: Exception) -> None:
    warnings.warn(
        f"pmca release callback {callback!r} raised {type(exc).__name__}: {exc}",
        RuntimeWarning,
        stacklevel=3,
    )


def _deliver(delivery: _Delivery) -> None:
    subscription = delivery.subscription
    events = delivery.events
    while delivery.cursor < delivery.limit and subscription.active:
        event = events[delivery.cursor]
        try:
            subscription.callback(event.address, event.length, event.kind, event.from_alloc)
        except Exception as exc:
            _report_failure(subscription.callback, exc)
        delivery.cursor += 1


class ReleaseDispatcher:
    """Delivers native release events to Python subscribers.

    Use the process-wide instance from :func:`dispatcher`.
    """

    def __init__(self, hooks: Callable[[], HookBackend] = backend) -> None:
        self._hooks = hooks
        self._reset_state()

    def _reset_state(self) -> None:
        self._lock = threading.Lock()
        self._subscriptions: list[Subscription] = []
        self._in_flight: list[_Delivery] = []
        self._listener: threading.Thread | None = None
        self._stop = threading.Event()

    # -- subscribing ---------------------------------------------------------------

    def subscribe(self, callback: ReleaseCallback) -> Subscription:
        """Deliver every release to ``callback(address, length, kind, from_alloc)``.

        Starts the listener thread with the first subscriber.  Raises
        :class:`NativeUnavailable` when there is no native backend.
        """
        self._hooks()
        subscription = Subscription(self, callback)
        with self._lock:
            self._subscriptions.append(subscription)
            self._ensure_listener_locked()
        return subscription

    def _remove(self, subscription: Subscription) -> None:
        with self._lock:
            if not subscription._active:
                return
            subscription._active = False
            self._subscriptions.remove(subscription)
            stopping = None if self._subscriptions else self._detach_listener_locked()
        if stopping is not None:
            self._join(stopping)

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
        """Unregister every subscriber and stop the listener (joined unless called from it)."""
        with self._lock:
            for subscription in self._subscriptions:
                subscription._active = False
            self._subscriptions.clear()
            stopping = self._detach_listener_locked()
        if stopping is not None:
            self._join(stopping)

    # -- draining ------------------------------------------------------------------

    def drain(self) -> int:
        """Pull every pending event and deliver it now; returns how many were pulled.

        Lost events (full ring, or a fork) are announced first as one
        ``(0, END_OF_MEMORY, "overflow", True)`` notification.
        """
        hooks = self._hooks()
        # First: an overwritten hook turns into an overflow in this very drain.
        check_overwrites()
        me = threading.get_ident()
        with self._lock:
            if self._subscriptions:
                self._ensure_listener_locked()  # after a fork, the child has none
            batch = self._pull_locked(hooks)
            mine = [_Delivery(batch, subscription, me) for subscription in self._subscriptions]
            for other in self._in_flight:
                if other.owner != me:  # our own are up the stack (re-entrant drain)
                    rest = other.take_over(me)
                    if rest is not None:
                        mine.append(rest)
            self._in_flight.extend(mine)
        _delivering.depth = _delivery_depth() + 1
        try:
            for delivery in mine:
                _deliver(delivery)
        finally:
            _delivering.depth -= 1
            # Finished deliveries cannot be taken over (cursor == limit), so
            # they may stay listed until the whole set is done.
            with self._lock:
                for delivery in mine:
                    self._in_flight.remove(delivery)
        return len(batch)

    def _pull_locked(self, hooks: HookBackend) -> tuple[ReleaseEvent, ...]:
        # At most `capacity` events were queued when we started, so pulling
        # that many bounds the call even while producers keep going.
        budget = hooks.capacity
        events: list[ReleaseEvent] = []
        overflowed = False
        while budget > 0:
            request = min(_CHUNK, budget)
            drained = hooks.drain(request)
            overflowed = overflowed or drained.overflowed
            events.extend(drained.events)
            budget -= len(drained.events)
            if len(drained.events) < request:
                break
        if overflowed:
            events.insert(0, OVERFLOW_EVENT)
        return tuple(events)

    # -- listener thread -----------------------------------------------------------

    def _ensure_listener_locked(self) -> None:
        if self._listener is not None and self._listener.is_alive():
            return
        self._stop = threading.Event()
        self._listener = threading.Thread(
            target=self._listen,
            args=(self._stop,),
            name="pmca-release-listener",
            daemon=True,
        )
        self._listener.start()

    def _detach_listener_locked(self) -> threading.Thread | None:
        listener, self._listener = self._listener, None
        if listener is None:
            return None
        self._stop.set()
        self._ring_doorbell()
        return listener

    def _ring_doorbell(self) -> None:
        # A saturated counter or a vanished fd: the listener is awake anyway.
        with contextlib.suppress(OSError):
            os.write(self._hooks().eventfd(), (1).to_bytes(8, "little"))

    @staticmethod
    def _join(listener: threading.Thread) -> None:
        # From inside a callback, the listener may itself be waiting in a
        # callback for something this thread holds: let it exit on its own.
        if listener is threading.current_thread() or _delivery_depth() > 0:
            return
        listener.join()

    def _listen(self, stop: threading.Event) -> None:
        hooks = self._hooks()
        # poll, not select: MPI ranks often hold more than FD_SETSIZE (1024)
        # descriptors, and select() cannot wait on a number that high.
        waiter = select.poll()
        doorbell = hooks.eventfd()
        waiter.register(doorbell, select.POLLIN)
        while not stop.is_set():
            hooks.rearm()  # before draining: a later push rings again
            try:
                self.drain()
            except Exception as exc:  # keep listening; report like a callback failure
                warnings.warn(f"pmca release listener: {exc!r}", RuntimeWarning, stacklevel=1)
            if stop.is_set():
                break
            try:
                waiter.poll()  # blocks without the GIL
                os.read(doorbell, 8)
            except BlockingIOError:
                pass
            except Exception:
                # The fd was replaced under us (fork): wait on the new one.
                stop.wait(0.05)
                waiter = select.poll()
                doorbell = hooks.eventfd()
                waiter.register(doorbell, select.POLLIN)

    # -- fork ----------------------------------------------------------------------

    def _after_fork_in_child(self) -> None:
        # The listener thread does not exist in the child and the lock may
        # have been held by a thread that does not either.  Subscribers stay;
        # a listener starts again at the next subscribe() or drain().
        subscriptions = [s for s in self._subscriptions if s._active]
        self._reset_state()
        self._subscriptions = subscriptions
        if subscriptions:
            # Rule 3 holds in the child too: someone listens, so the child's
            # ring drains instead of overflowing.
            with self._lock:
                self._ensure_listener_locked()


_dispatcher_lock = threading.Lock()
_dispatcher: ReleaseDispatcher | None = None


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
