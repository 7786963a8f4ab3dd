"""Pvar sessions and handles, with MPI_T's start/stop/read/reset semantics.

A handle never writes the producer's counter: it keeps its own view. For
counters, aggregates and timers that view is the growth of the producer's
monotonic value while the handle was started (a snapshot is taken at start
and at reset), so a session opened after some traffic reads only what came
after, and two sessions never disturb each other. Watermarks are the
extreme seen since start or reset; other classes read the value now.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable
from typing import Any

from .._public import public
from ._pvar_sweep import Sweep
from ._pvars import (
    ACCUMULATING,
    REGISTRY,
    WATERMARKS,
    PVar,
    PVarClass,
    PVarError,
    PVarFlag,
    PVarGroupField,
    PVarRegistry,
    PVarSource,
    PVarWarning,
    Reader,
)

__all__ = ["PVarHandle", "PVarSession"]


def _unset(_obj: Any) -> float:
    raise AssertionError("a handle read its fast path before choosing one")


@public
class PVarHandle:
    """One pvar (bound to ``obj``) as one session sees it.

    Continuous pvars start started and cannot be stopped; the others count
    only between :meth:`start` and :meth:`stop`.
    """

    def __init__(
        self,
        registry: PVarRegistry,
        pvar: PVar,
        obj: Any,
        changed: Callable[[], None] = lambda: None,
    ) -> None:
        self.pvar = pvar
        #: Called when what a sweep computes from changes (see PVarSession.read_all).
        self._changed = changed
        self.obj = obj
        self._registry = registry
        self._entry = registry.entry(pvar.name)
        self._continuous = bool(pvar.flags & PVarFlag.CONTINUOUS)
        self._accumulating = pvar.klass in ACCUMULATING
        self._high = pvar.klass is PVarClass.HIGHWATERMARK
        self._running = False
        self._freed = False
        #: Said that a read of a handle never started gives nothing (once per handle).
        self._told_unstarted = False
        #: What was counted in earlier started intervals (accumulating classes).
        self._accumulated: float = 0
        #: The producer's value at the last start or reset.
        self._base: float = 0
        #: The watermark, and the producer's own peak when it was last restarted.
        self._mark: float = 0
        self._peak_base: float | None = None
        #: The entry's list of sources when it held one process-wide producer,
        #: and that producer's read and peak: read directly while the entry
        #: keeps that very list (registration replaces it, freeing forgets it).
        self._seen: list[PVarSource] | None = None
        self._fast: Reader = _unset
        self._fast_peak: Reader | None = None
        #: That producer's group field, if it reads this pvar with others.
        self._fast_group: PVarGroupField | None = None
        if self._continuous:
            self._restart()
            self._running = True
        # Counters and watermarks that are not continuous count only while started.
        self._counts_when_started = not self._continuous and (
            self._accumulating or pvar.klass in WATERMARKS
        )

    @property
    def name(self) -> str:
        return self.pvar.name

    @property
    def running(self) -> bool:
        return self._running

    def _now(self) -> float:
        sources = self._entry.sources
        if sources is self._seen:
            return self._fast(self.obj)
        return self._now_looked_up(sources)

    def _now_looked_up(self, sources: list[PVarSource]) -> float:
        if self._freed:
            raise PVarError(f"pvar handle for {self.name!r} was freed with its session")
        if len(sources) == 1 and sources[0].ownerless:
            # one process-wide producer: read it directly from now on (its readers
            # first: another thread's read trusts them as soon as _seen matches)
            self._fast, self._fast_peak = sources[0].read, sources[0].peak
            self._fast_group = sources[0].group
            self._seen = sources
            self._changed()
            return self._fast(self.obj)
        if self._seen is not None:  # no longer one producer: sweeps must see it
            self._seen = None
            self._changed()
        return self._registry.read(self.pvar.name, self.obj)

    def _peak(self) -> float | None:
        if self._entry.sources is self._seen:
            return None if self._fast_peak is None else self._fast_peak(self.obj)
        return self._registry.peak(self.name, self.obj)

    def _restart(self, now: float | None = None) -> None:
        """Snapshot the producer: the handle counts from here."""
        now = self._now() if now is None else now
        self._base = now
        if self.pvar.klass in WATERMARKS:
            self._mark = now
            self._peak_base = self._peak()
        self._changed()

    def start(self) -> None:
        if self._continuous:
            raise PVarError(f"pvar {self.name!r} is continuous: it is always started")
        if not self._running:
            self._restart()
            self._registry.notify(self.name, True)
            self._running = True
            self._told_unstarted = True  # started once: a stopped read is its count
            self._changed()

    def stop(self) -> None:
        if self._continuous:
            raise PVarError(f"pvar {self.name!r} is continuous: it cannot be stopped")
        if self._running:
            now = self._now()
            self._value(now)  # a watermark takes its last sample
            if self.pvar.klass in ACCUMULATING:
                self._accumulated += now - self._base
            self._running = False
            self._changed()
            self._registry.notify(self.name, False)

    def _free(self) -> None:
        if self._running and not self._continuous:
            self._registry.notify(self.name, False)
        self._running = False
        self._freed = True
        self._seen = None
        self._changed()

    def _value(self, now: float) -> float:
        klass = self.pvar.klass
        if klass in ACCUMULATING:
            return now + (self._accumulated - self._base) if self._running else self._accumulated
        if klass in WATERMARKS:
            return self._watermark(now)
        return now

    def _watermark(self, now: float) -> float:
        """The mark with ``now`` and the producer's peak taken in (a sweep calls this)."""
        if not self._running:
            return self._mark
        high = self._high
        mark = self._mark
        if now > mark if high else now < mark:
            mark = now
        peak = self._peak()
        # A producer's peak that moved since our start was reached after it.
        if (
            peak is not None
            and peak != self._peak_base
            and self._peak_base is not None
            and (peak > mark if high else peak < mark)
        ):
            mark = peak
        self._mark = mark
        return mark

    def read(self) -> float:
        """The handle's value: growth while started, a watermark, or the value now."""
        # _now() inlined: tools call this for every pvar, often
        sources = self._entry.sources
        now = self._fast(self.obj) if sources is self._seen else self._now_looked_up(sources)
        if not (self._running or self._told_unstarted) and self._counts_when_started:
            self._tell_unstarted()
        if self._accumulating:  # the common case, without a call more (tools poll this)
            return now + (self._accumulated - self._base) if self._running else self._accumulated
        return self._value(now)

    def _tell_unstarted(self) -> None:
        """A read of a handle never started gives 0, not the producer's count: say so once."""
        self._told_unstarted = True
        from ._errors import warn_user

        warn_user(
            PVarWarning(
                f"pvar {self.name!r} ({self.pvar.klass.value}) is read from a handle that was "
                "never started: it counts only between start() and stop(), so it reads 0; "
                "call start() first"
            )
        )

    def _sweep_source(self) -> tuple[PVarGroupField | None, float, Reader | None] | None:
        """How :meth:`PVarSession.read_all` reads this handle until it or its
        producers change: the producer's group field (None: read alone), the
        offset added to the producer's value, and for a watermark what turns
        the value into the handle's mark; None: with :meth:`read`."""
        if self._seen is not self._entry.sources:
            return None
        if self.pvar.klass in WATERMARKS:
            return self._fast_group, 0, self._watermark
        if self._accumulating and not self._running:
            return None
        # read()'s own sum, so that a sweep gives its very value
        offset = self._accumulated - self._base if self._accumulating else 0
        return self._fast_group, offset, None

    def _check_writable(self, what: str) -> None:
        if self.pvar.flags & PVarFlag.READONLY:
            raise PVarError(f"pvar {self.name!r} is read-only: it cannot be {what}")

    def reset(self) -> None:
        """Count from zero (from the level now, for a watermark)."""
        self._check_writable("reset")
        self._accumulated = 0
        self._restart()

    def readreset(self) -> float:
        """Read and reset in one step: nothing counted in between is lost."""
        self._check_writable("reset")
        now = self._now()
        value = self._value(now)
        self._accumulated = 0
        self._restart(now)
        return value

    def write(self, value: float) -> None:
        """Set the handle's value (its own view: the producer's counter is untouched)."""
        self._check_writable("written")
        if self.pvar.klass not in ACCUMULATING:
            raise PVarError(f"pvar {self.name!r} ({self.pvar.klass.value}) cannot be written")
        now = self._now()
        self._accumulated = value
        self._base = now
        self._changed()

    def __repr__(self) -> str:
        bound = "" if self.obj is None else f" obj={self.obj!r}"
        state = "started" if self._running else "stopped"
        return f"<PVarHandle {self.name}{bound} {state}>"


@public
class PVarSession:
    """A set of handles, independent of every other session (MPI_T_pvar_session)."""

    def __init__(
        self, registry: PVarRegistry = REGISTRY, declare: Callable[[str], None] | None = None
    ) -> None:
        self._registry = registry
        #: Declares a pvar asked for before its producer did (see Session.pvar_session).
        self._declare = declare
        self._handles: list[PVarHandle] = []
        self._freed = False
        # read_all's sweep, good while no handle changed since it was made
        # (a handle's change takes a new generation after changing its state)
        # and no producer registered (the registry's generation)
        self._generations = itertools.count()
        self._generation = next(self._generations)
        self._sweep: Sweep | None = None
        self._sweep_generations = (-1, -1)

    def _changed(self) -> None:
        self._generation = next(self._generations)

    def handle(self, name: str, obj: Any = None) -> PVarHandle:
        """A handle on pvar ``name``; ``obj`` names what a bound pvar is bound to."""
        if self._freed:
            raise PVarError("this pvar session was freed")
        if self._declare is not None and not self._registry.declared(name):
            self._declare(name)
        pvar = self._registry.get(name)
        self._registry.check_object(name, obj)
        handle = PVarHandle(self._registry, pvar, obj, self._changed)
        self._handles.append(handle)
        self._changed()
        return handle

    @property
    def handles(self) -> list[PVarHandle]:
        return list(self._handles)

    def read_all(self) -> list[float]:
        """Every handle's :meth:`~PVarHandle.read`, in the order the handles were made.

        One call for a tool that sweeps many pvars: the pvars a producer
        keeps together (a btl peer's counters, the message queues' lengths,
        a cache's counts) are read once per sweep and object, so they come
        from one instant.
        """
        if self._freed:
            raise PVarError("this pvar session was freed")
        sweep = self._sweep
        generations = (self._generation, self._registry.generation)
        if sweep is None or self._sweep_generations != generations:
            # generations taken first: a change while the sweep is made shows next time
            sweep = self._sweep = Sweep(self._handles)
            self._sweep_generations = generations
        return sweep()

    def free(self) -> None:
        """Free the session and every handle it made."""
        for handle in self._handles:
            handle._free()
        self._handles.clear()
        self._sweep = None
        self._freed = True

    def __enter__(self) -> PVarSession:
        return self

    def __exit__(self, *exc: object) -> None:
        self.free()
