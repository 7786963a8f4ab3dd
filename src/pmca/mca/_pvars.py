"""Performance variables: what a framework or component counts, readable by tools.

A producer registers a pvar with a *read* callable over a counter it already
keeps (native counters read in place, Python attributes incremented where
the hot path already does its work); reading costs whatever the callable
costs, and nothing is paid while nobody reads. Several sources may register
one name (two tcp modules of one process, two caches): a read sums them, or
takes their extreme for the watermark classes.

Names are ``<framework>_<component>_<name>`` (``btl_tcp_bytes_sent``,
``memory_patcher_events_delivered``), classes and flags are MPI_T's, and a
pvar is bound to nothing or to one kind of object (a peer rank, a cache, a
module), which a handle then names.
"""

from __future__ import annotations

import enum
import threading
import weakref
from collections.abc import Callable, Iterable, Iterator, Sequence
from typing import Any, Generic, TypeVar

from attrs import frozen

from .._public import public
from .._records import FrozenValue
from ._errors import PmcaError
from ._names import check_component_name, check_framework_name

__all__ = [
    "REGISTRY",
    "Binding",
    "Entry",
    "PVar",
    "PVarClass",
    "PVarError",
    "PVarFlag",
    "PVarGroup",
    "PVarGroupField",
    "PVarRegistry",
    "PVarSource",
    "PVarWarning",
    "Producers",
    "Reader",
]

_Producer = TypeVar("_Producer")
_Kept = TypeVar("_Kept")


@public
class PVarError(PmcaError, ValueError):
    """A performance variable was registered, named or used wrongly."""


@public
class PVarWarning(UserWarning):
    """A performance variable read that gives nothing useful (a handle never started)."""


@public
class PVarClass(enum.Enum):
    """MPI_T's pvar classes: how values behave over time."""

    STATE = "state"
    LEVEL = "level"
    SIZE = "size"
    PERCENTAGE = "percentage"
    HIGHWATERMARK = "highwatermark"
    LOWWATERMARK = "lowwatermark"
    COUNTER = "counter"
    AGGREGATE = "aggregate"
    TIMER = "timer"
    GENERIC = "generic"


#: Classes whose underlying value only grows: a handle reads the growth
#: since its start (a snapshot of the counter), so sessions never interfere.
ACCUMULATING = frozenset({PVarClass.COUNTER, PVarClass.AGGREGATE, PVarClass.TIMER})
WATERMARKS = frozenset({PVarClass.HIGHWATERMARK, PVarClass.LOWWATERMARK})


@public
class Binding(enum.Enum):
    """What one value of a pvar belongs to."""

    NONE = "none"
    PEER = "peer"
    CACHE = "cache"
    MODULE = "module"


@public
class PVarFlag(enum.Flag):
    """MPI_T's pvar flags."""

    NONE = 0
    #: A handle cannot write it (or reset it: the value is the process's state).
    READONLY = enum.auto()
    #: Always counting: a handle starts started and cannot be stopped.
    CONTINUOUS = enum.auto()
    #: Read and reset in one step (pmca reads under the GIL: every pvar is).
    ATOMIC = enum.auto()


@public
@frozen(eq=False, repr=False)
class PVar(FrozenValue):
    """What ``s.pvars()`` lists about one performance variable."""

    name: str
    klass: PVarClass
    unit: str
    level: int
    binding: Binding
    description: str
    type: str = "int"
    flags: PVarFlag = PVarFlag.NONE


#: ``read(obj)`` of one source: ``obj`` is ``None`` for an unbound pvar.
Reader = Callable[[Any], float]
#: The objects a bound source has values for (peer ranks, cache names...).
Objects = Callable[[], Iterable[Any]]
#: ``notify(started)``: a handle on the pvar was started (True) or stopped or
#: freed (False), for a producer that counts only while someone looks.
Notify = Callable[[bool], None]


@public
class PVarGroup:
    """Several pvars one producer reads at once: a peer's btl counters, the queue lengths.

    ``read(obj)`` gives every member's value for ``obj`` in one sequence; a
    pvar registered with ``group=group.field(i)`` is its ``i``-th value.
    :meth:`PVarSession.read_all <pmca.mca.PVarSession.read_all>` calls
    ``read`` once per group and object in a sweep, so its members are read
    at one instant and a tool sweeping them pays for the walk once.
    """

    __slots__ = ("read",)

    def __init__(self, read: Callable[[Any], Sequence[float]]) -> None:
        self.read = read

    def field(self, index: int) -> PVarGroupField:
        """The ``index``-th value of :meth:`read`, as a pvar's ``group``."""
        return PVarGroupField(self, index)


@public
@frozen(eq=False, repr=False)
class PVarGroupField(FrozenValue):
    """A pvar's place in a :class:`PVarGroup` (its value is ``group.read(obj)[index]``)."""

    group: PVarGroup
    index: int


class PVarSource:
    """One producer's read callable for a pvar, alive as long as its owner."""

    __slots__ = ("_owner", "group", "notify", "objects", "ownerless", "peak", "read")

    def __init__(
        self,
        read: Reader,
        objects: Objects | None,
        owner: object | None,
        peak: Reader | None,
        notify: Notify | None = None,
        group: PVarGroupField | None = None,
    ) -> None:
        self.read = read
        self.objects = objects
        self.peak = peak
        self.notify = notify
        self.group = group
        self._owner = None if owner is None else weakref.ref(owner)
        #: Process-wide: always alive.
        self.ownerless = owner is None

    @property
    def alive(self) -> bool:
        return self._owner is None or self._owner() is not None

    def same_owner(self, owner: object | None) -> bool:
        if self._owner is None:
            return owner is None
        return owner is not None and self._owner() is owner


class Producers(Generic[_Producer, _Kept]):
    r"""The live objects a pvar's reader sums over (modules, engines), held
    weakly, and what the closed ones counted.

    :attr:`state` is one tuple ``(refs, retired)``, replaced whole, never
    changed in place: a reader takes it once and walks ``refs`` with no copy
    and no iteration guard (``weakref.WeakSet`` costs both on every read).
    A producer that closes is :meth:`retire`\ d: ``fold`` adds its counts to
    ``retired`` in the same store that drops it from ``refs``, so a reader
    sums each count exactly once, and a counter does not go down when its
    producer closes or is collected later. One that goes away unretired is
    dropped by its weak reference's callback (or, when that callback cannot
    take the lock, by the next :meth:`add`), and its counts with it.
    """

    __slots__ = ("__weakref__", "_fold", "_lock", "state")

    def __init__(self, retired: _Kept, fold: Callable[[_Kept, _Producer], _Kept]) -> None:
        self.state: tuple[tuple[weakref.ref[_Producer], ...], _Kept] = ((), retired)
        self._fold = fold
        self._lock = threading.Lock()

    @property
    def refs(self) -> tuple[weakref.ref[_Producer], ...]:
        """Weak references to the producers not retired (some may be dead)."""
        return self.state[0]

    @property
    def retired(self) -> _Kept:
        """What the retired producers counted."""
        return self.state[1]

    def add(self, producer: _Producer) -> None:
        mine = weakref.ref(self)

        def gone(ref: weakref.ref[_Producer]) -> None:
            # The collector may run this inside add() or retire() on the thread
            # holding the lock (a cycle freed by their own allocation): never
            # wait for it. A dead reference left behind is skipped by readers,
            # dropped by the next add.
            producers = mine()
            if producers is not None and producers._lock.acquire(blocking=False):
                try:
                    refs, retired = producers.state
                    producers.state = (tuple(r for r in refs if r is not ref), retired)
                finally:
                    producers._lock.release()

        with self._lock:
            refs, retired = self.state
            alive = tuple(r for r in refs if r() is not None)
            if any(r() is producer for r in alive):
                self.state = (alive, retired)
                return
            self.state = ((*alive, weakref.ref(producer, gone)), retired)

    def retire(self, producer: _Producer) -> None:
        """Keep what ``producer`` counted and stop reading it (once it counts no more)."""
        with self._lock:
            refs, retired = self.state
            if not any(r() is producer for r in refs):
                return  # never added, or retired already
            kept = self._fold(retired, producer)
            self.state = (tuple(r for r in refs if r() is not producer), kept)

    def live(self) -> list[_Producer]:
        """The producers alive and not retired now."""
        return [p for p in (r() for r in self.refs) if p is not None]

    def __iter__(self) -> Iterator[_Producer]:
        return iter(self.live())

    def __len__(self) -> int:
        return len(self.live())


class Entry:
    """One pvar and its producers' sources (a handle keeps it to read without a lookup)."""

    __slots__ = ("pvar", "sources")

    def __init__(self, pvar: PVar) -> None:
        self.pvar = pvar
        self.sources: list[PVarSource] = []


_LEVELS = range(1, 10)


@public
class PVarRegistry:
    """The process's performance variables, by name."""

    def __init__(self) -> None:
        self._entries: dict[str, Entry] = {}
        self._lock = threading.Lock()
        #: Taken anew each time a source registers (sweeps remake their plans).
        self.generation = 0

    def register(
        self,
        framework: str,
        component: str,
        name: str,
        klass: PVarClass,
        read: Reader,
        *,
        description: str,
        unit: str = "",
        level: int = 4,
        binding: Binding = Binding.NONE,
        type: str = "int",
        flags: PVarFlag = PVarFlag.NONE,
        objects: Objects | None = None,
        owner: object | None = None,
        peak: Reader | None = None,
        notify: Notify | None = None,
        group: PVarGroupField | None = None,
    ) -> PVar:
        """Add a source for ``<framework>_<component>_<name>`` (declaring it first time).

        ``owner``, when given, is held weakly: the source goes away with it,
        and registering again for the same owner (or again without one)
        replaces the earlier source.
        A name registered again must keep its class, unit and binding.
        A watermark's ``read`` gives the level now; ``peak``, if the producer
        keeps one, the extreme it ever reached (a handle then sees a peak
        reached between two of its reads).
        ``notify(started)`` is called as handles on a pvar that is not
        continuous start (True) and stop or are freed (False), so that a
        producer whose counting costs something counts only while some
        handle is started (MPI_T's start/stop notification).
        ``group``, when the producer reads this pvar together with others
        (:class:`PVarGroup`), lets a sweep read them once; ``read`` must
        give the same value as the group's field.
        """
        if notify is not None and flags & PVarFlag.CONTINUOUS:
            raise PVarError(f"pvar {name!r}: a continuous pvar is never started or stopped")
        check_framework_name(framework)
        check_component_name(component)
        check_component_name(name)
        if not isinstance(klass, PVarClass):
            raise PVarError(f"pvar {name!r}: class {klass!r} is not a pmca.mca.PVarClass")
        if level not in _LEVELS:
            raise PVarError(f"pvar {name!r}: level {level!r} is outside 1..9")
        if (binding is Binding.NONE) != (objects is None):
            raise PVarError(
                f"pvar {name!r}: a bound pvar needs objects=..., an unbound one none "
                f"(binding {binding.value})"
            )
        if klass in ACCUMULATING and type not in ("int", "float"):
            raise PVarError(f"pvar {name!r}: a {klass.value} must be an int or a float")
        full = f"{framework}_{component}_{name}"
        pvar = PVar(full, klass, unit, level, binding, description, type, flags)
        with self._lock:
            entry = self._entries.get(full)
            if entry is None:
                entry = self._entries[full] = Entry(pvar)
            elif (entry.pvar.klass, entry.pvar.unit, entry.pvar.binding) != (klass, unit, binding):
                raise PVarError(
                    f"pvar {full!r} registered again as {klass.value}/{unit}/{binding.value}; "
                    f"it is {entry.pvar.klass.value}/{entry.pvar.unit}/{entry.pvar.binding.value}"
                )
            # One source per owner; an ownerless (process-wide) source replaces
            # the last one (a component module imported afresh registers again).
            # A new list, assigned once: a handle that kept the old one as its
            # fast path sees the change by identity (see PVarHandle).
            entry.sources = [
                *(s for s in entry.sources if s.alive and not s.same_owner(owner)),
                PVarSource(read, objects, owner, peak, notify, group),
            ]
            self.generation += 1
        return entry.pvar

    def pvars(self) -> list[PVar]:
        """Every registered pvar, by name."""
        with self._lock:
            return [self._entries[name].pvar for name in sorted(self._entries)]

    def get(self, name: str) -> PVar:
        return self._entry(name).pvar

    def declared(self, name: str) -> bool:
        """Whether pvar ``name`` is declared (some producer registered it once)."""
        return name in self._entries

    def entry(self, name: str) -> Entry:
        """The pvar ``name`` with its sources, as :meth:`read` finds them."""
        return self._entry(name)

    def _entry(self, name: str) -> Entry:
        entry = self._entries.get(name)
        if entry is None:
            close = [n for n in self._entries if n.startswith(name.split("_")[0] + "_")]
            hint = f" (pvars of that framework: {', '.join(sorted(close)[:8])})" if close else ""
            raise PVarError(f"no performance variable named {name!r}{hint}")
        return entry

    def notify(self, name: str, started: bool) -> None:
        """Tell the producers of ``name`` that a handle started or stopped."""
        for source in list(self._entry(name).sources):
            if source.alive and source.notify is not None:
                source.notify(started)

    def objects(self, name: str) -> list[Any]:
        """The objects a bound pvar has values for now."""
        entry = self._entry(name)
        found: list[Any] = []
        seen: set[Any] = set()  # a job's peers can be thousands: no list search per object
        for source in list(entry.sources):
            if source.alive and source.objects is not None:
                for obj in source.objects():
                    try:
                        if obj in seen:
                            continue
                        seen.add(obj)
                    except TypeError:  # unhashable: compared one by one
                        if obj in found:
                            continue
                    found.append(obj)
        return found

    def check_object(self, name: str, obj: Any) -> None:
        """Refuse an ``obj`` that does not fit the pvar's binding."""
        pvar = self._entry(name).pvar
        if pvar.binding is Binding.NONE:
            if obj is not None:
                raise PVarError(f"pvar {name!r} is not bound to anything; obj must be None")
            return
        known = self.objects(name)
        if obj not in known:
            raise PVarError(
                f"pvar {name!r} is bound per {pvar.binding.value}: {obj!r} is not one of {known!r}"
            )

    def read(self, name: str, obj: Any = None) -> float:
        """The process's value now: summed over sources, or their extreme for watermarks."""
        entry = self._entries.get(name) or self._entry(name)
        sources = entry.sources
        if len(sources) == 1 and sources[0].alive:
            # One producer (the common case): its value is the combination.
            return sources[0].read(obj)
        return self._combine(entry, [s.read(obj) for s in self._sources(entry, obj)])

    def peak(self, name: str, obj: Any = None) -> float | None:
        """A watermark's extreme so far, if its producers keep one."""
        entry = self._entry(name)
        peaks = [s.peak(obj) for s in self._sources(entry, obj) if s.peak is not None]
        return self._combine(entry, peaks) if peaks else None

    @staticmethod
    def _sources(entry: Entry, obj: Any) -> list[PVarSource]:
        sources = entry.sources
        if len(sources) == 1:
            # The common case (one producer per name): its reader answers for
            # any obj (0 for one it never counted), so asking for its objects,
            # a walk over its peers or caches, is not paid on every read.
            return sources if sources[0].alive else []
        return [
            s
            for s in list(entry.sources)
            if s.alive and (obj is None or s.objects is None or obj in s.objects())
        ]

    @staticmethod
    def _combine(entry: Entry, values: list[float]) -> float:
        klass = entry.pvar.klass
        if klass is PVarClass.HIGHWATERMARK:
            return max(values, default=0)
        if klass is PVarClass.LOWWATERMARK:
            return min(values, default=0)
        if klass is PVarClass.STATE:
            return values[-1] if values else 0
        return sum(values)


#: The process's registry: producers register here, sessions read from here.
REGISTRY = PVarRegistry()
