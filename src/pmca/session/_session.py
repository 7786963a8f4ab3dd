"""``pmca.Session``: one handle on the shared runtime (Open MPI's MPI_Session)."""

from __future__ import annotations

import atexit
import enum
import os
import sys
import time
import warnings
from collections.abc import Callable, Mapping, Sequence
from types import TracebackType
from typing import TYPE_CHECKING, Any, TypeVar

from .._interrupts import deferred_interrupts
from .._public import public
from ..mca._errors import FrameworkError, PmcaError, SessionError
from ..mca._events import EVENTS, EventCallback, EventRegistration, EventType, Safety
from ..mca._open import OpenFramework
from ..mca._pvar_session import PVarSession
from ..mca._pvars import REGISTRY, PVar, PVarClass, PVarFlag, PVarGroup
from ..mca.params import ParamError, UnknownParamError
from ..runtime._domains import FinalizeDomain
from ..runtime._given import check_given_names
from ..runtime._runtime import RUNTIME, TRANSITION_WAIT, Runtime
from ._handle import FrameworkHandle

if TYPE_CHECKING:
    from typing_extensions import Self

    from ..btl.bml import Bml
    from ..mca._component_info import ComponentInfo
    from ..mca.params import Param
    from ..p2p import P2p
    from ..p2p._attach import DataPath
    from ..world import World
    from ._data import DataPathSlot
    from ._live import LiveView


_T = TypeVar("_T")


def _checked_mca(mca: Mapping[str, Any] | None) -> dict[str, Any]:
    """``Session(mca=...)`` as a dict; names must be parameter names (strings)."""
    from ..mca.params._paramfile import KEY

    if mca is None:
        return {}
    if not isinstance(mca, Mapping):
        raise TypeError(
            f"Session(mca=...) takes a mapping of parameter names to values, "
            f"not {type(mca).__name__}"
        )
    for name in mca:
        if not isinstance(name, str) or not KEY.fullmatch(name):
            raise ParamError(
                f"Session(mca=...): {name!r} is not an MCA parameter name "
                f"(names are strings matching [A-Za-z_][A-Za-z0-9_]*, like 'memory')"
            )
    return dict(mca)


def _checked_frameworks(frameworks: Sequence[str] | None) -> list[str] | None:
    """``Session(frameworks=...)`` as a list of names; a lone string is a mistake."""
    if frameworks is None:
        return None
    if isinstance(frameworks, str):
        raise TypeError(
            f"Session(frameworks=...) takes a list of framework names, not a string; "
            f"did you mean frameworks=[{frameworks!r}]?"
        )
    names = list(frameworks)
    for name in names:
        if not isinstance(name, str):
            raise TypeError(f"Session(frameworks=...): {name!r} is not a framework name (a string)")
    return names


#: Seconds spent in every session's init and finalize in this process (TIMER pvars).
_TIMES = {"init": 0.0, "finalize": 0.0}


def _timer(which: str) -> Callable[[object], float]:
    return lambda _obj: _TIMES[which]


#: Both times, read at once by a sweep (in _TIMES' order).
_BOTH_TIMES = PVarGroup(lambda _obj: list(_TIMES.values()))


for _which in _TIMES:
    REGISTRY.register(
        "pmca",
        "session",
        f"{_which}_time",
        PVarClass.TIMER,
        _timer(_which),
        group=_BOTH_TIMES.field(list(_TIMES).index(_which)),
        unit="seconds",
        type="float",
        level=4,
        flags=PVarFlag.CONTINUOUS,
        description=f"Seconds spent in pmca.Session.{_which}() in this process",
    )


class _State(enum.Enum):
    NEW = "new"
    ACTIVE = "active"
    FINALIZED = "finalized"


@public
class Session:
    """A handle whose init opens frameworks and whose finalize closes them.

    Several sessions may be alive at once: the first init builds the shared
    parameter space, each session takes references on the frameworks it
    asks for, and the last finalize tears everything down.

    :param mca: parameter values with the priority of the command line.
    :param frameworks: the frameworks to open (with their dependencies);
        ``None`` opens every installed framework.
    :param world: the processes to exchange btl addresses with (one
        allgather at init; for a world of one rank, at the first use of
        :attr:`p2p` or :meth:`reach`); or the name of the kind of world to
        build at init (``"launcher"``, ``"pmix"``, ``"pmi"``, ``"single"``),
        which the session then closes at finalize; default: the parameter
        ``pmca_base_world`` (``single``, :func:`pmca.world.single`).

    In a world of one rank the btl components are loaded and their
    parameters registered at init, but opened and queried only when the
    session first asks for them (:meth:`modules`, :meth:`components`,
    :meth:`failures`, :meth:`framework`, :attr:`p2p`, :meth:`reach`): a
    session that never moves a byte makes no socket and no shared segment.
    """

    def __init__(
        self,
        mca: Mapping[str, Any] | None = None,
        frameworks: Sequence[str] | None = None,
        *,
        world: World | str | None = None,
        _runtime: Runtime | None = None,
    ) -> None:
        self._mca = _checked_mca(mca)
        self._requested = _checked_frameworks(frameworks)
        self._runtime = _runtime or RUNTIME
        self._state = _State.NEW
        self._opened: list[str] = []
        self._attached = False
        #: The world's kind to build at init, when not given built.
        self._world_kind = world if isinstance(world, str) else None
        self._world: World | None = None if isinstance(world, str) else world
        #: The btl data path's tag and builder, and the path once built.
        self._slot: DataPathSlot | None = None
        #: Finalize took the data path away: another thread asking for it is told so.
        self._data_closing = False
        #: An interrupt ended the last transition (a retried finalize is a no-op).
        self._interrupted = False
        #: Finalize runs because of an exception (its peers are told so, and it
        #: does not wait long for them).
        self._after_error = False
        #: Cleanups run at this session's finalize, last registered first.
        self.domain = FinalizeDomain("session")

    # -- lifecycle ------------------------------------------------------------
    #
    # Each transition runs with SIGINT held back (pmca._interrupts) and under
    # the runtime lock, and marks the session's state only after the work it
    # describes: an interrupted init is rolled back, an interrupted finalize
    # completes first, and in both cases the KeyboardInterrupt follows.

    def init(self) -> Self:
        started = time.perf_counter()
        try:
            self._init()
        except BaseException:
            # Whatever raised, an init that raises leaves nothing behind:
            # even a KeyboardInterrupt arriving after the work was done.
            if self._state is _State.ACTIVE:
                with self._runtime.lock, deferred_interrupts():
                    self._interrupted = True
                    self._after_error = True
                    self._finalize_locked()
            raise
        finally:
            _TIMES["init"] += time.perf_counter() - started
        return self

    def _init(self) -> None:
        runtime = self._runtime
        if self._state is not _State.NEW:
            self._refuse_init()
        # Parameter files are read before any lock is taken (a FIFO or a
        # slow file system must not stall every other thread's transition).
        space = runtime.read_params(self._mca) if runtime.sessions == 0 else None
        with runtime.lock, deferred_interrupts() as deferral:
            if self._state is not _State.NEW:
                self._refuse_init()
            try:
                runtime.attach(self, self._mca, space)
                self._build_world()
                names = self._requested
                if names is None:
                    names = list(runtime.catalog.frameworks)
                one_rank = self._world is None or self._world.size == 1
                for name in runtime.catalog.dependency_order(names):
                    runtime.open_framework(name, defer_selection=one_rank and name == "btl")
                    self._opened.append(name)
                check_given_names(runtime)
                self._attach_data_path()
            except BaseException:
                self._interrupted = deferral.interrupted
                self._after_error = True
                self._finalize_locked()
                raise
            self._state = _State.ACTIVE
            runtime.live.append(self)
            if runtime.sessions == 1:
                _open_live_view(runtime)
            if _LIVE and self._world is not None:
                _name_job(_LIVE[0], self._world)

    def _build_world(self) -> None:
        """The world named by ``world=`` or ``pmca_base_world``, built now and
        closed at this session's finalize."""
        if self._world is not None:
            return
        params = self._runtime.params
        kind = self._world_kind or str(params.value("pmca_base_world"))
        if kind == "single" and self._world_kind is None:
            return  # the default: built at first need (pmca.runtime._data)
        from ..world._launcher import build

        world = build(
            kind,
            timeout=float(params.value("pmca_base_modex_timeout")),
            verbose=int(params.value("pmca_base_world_verbose")),
            destination=str(params.value("mca_base_verbose")),
            pmi_version=str(params.value("pmca_base_pmi_version")),
        )
        close = getattr(world, "close", None)
        if close is not None:
            self.domain.append(close, f"close {world.description}")
        self._world = world

    def _refuse_init(self) -> None:
        if self._state is _State.ACTIVE:
            raise SessionError("session is already initialized")
        raise SessionError("session was finalized; create a new pmca.Session")

    def finalize(self) -> None:
        """Close this session's frameworks, run its cleanups and detach it.

        Everything is attempted even when some of it fails; the errors are
        raised afterwards. When an interrupt ended the previous init or
        finalize, calling it again is harmless.
        """
        started = time.perf_counter()
        try:
            errors = self._finalize()
            _TIMES["finalize"] += time.perf_counter() - started
            fatal = [e for e in errors if not isinstance(e, Exception)]
            if fatal:
                raise fatal[0]
            if len(errors) == 1:
                raise errors[0]
            if errors:
                raise SessionError(
                    f"finalize met {len(errors)} errors: " + "; ".join(repr(e) for e in errors)
                ) from errors[0]
        except BaseException as exc:
            if self._state is _State.FINALIZED and not isinstance(exc, Exception):
                self._interrupted = True  # it completed; a retry is a no-op
            raise

    def _finalize(self) -> list[BaseException]:
        runtime = self._runtime
        with runtime.lock, deferred_interrupts():
            if self._state is _State.FINALIZED:
                if self._interrupted:
                    return []  # a retry after Ctrl-C: it is already complete
                raise SessionError("session was already finalized")
            if self._state is _State.NEW:
                raise SessionError("session was never initialized")
            return self._finalize_locked()

    def _finalize_locked(self) -> list[BaseException]:
        """Undo whatever this session did, in reverse; never stop half-way."""
        runtime = self._runtime
        errors: list[BaseException] = self._close_data_path()
        while self._opened:
            name = self._opened.pop()
            try:
                runtime.close_framework(name)
            except BaseException as exc:
                errors.append(exc)
        errors.extend(failure.error for failure in self.domain.run())
        # Twice at most: an interrupt (a second Ctrl-C) can cut the first
        # detach short before it counted this session out.
        for _ in range(2):
            if not self._attached:
                break
            try:
                runtime.detach(self)
            except BaseException as exc:
                errors.append(exc)
        if self in runtime.live:
            runtime.live.remove(self)
        if runtime.sessions == 0:
            _close_live_view()
        self._state = _State.FINALIZED
        return errors

    def _attach_data_path(self) -> None:
        """Modex and connections for the btl framework, if this session opened it.

        With a world of several ranks they are made now (every rank meets in
        the allgather); with a world of one rank at first use (pmca.session._data).
        """
        btl = self._runtime.frameworks.get("btl")
        if "btl" not in self._opened or btl is None:
            return
        # Only now: a session without a btl imports neither the btl base nor p2p.
        from ..world import single
        from ._data import DataPathSlot

        if self._world is None:
            self._world = single()
        timeout = float(self._runtime.params.value("pmca_base_modex_timeout"))
        self._slot = DataPathSlot(btl, self._world, timeout)
        if self._world.size != 1:
            self._slot.get()

    def _close_data_path(self) -> list[BaseException]:
        slot, self._slot = self._slot, None
        if slot is None:
            return []
        self._data_closing = True
        params = self._runtime.params
        try:
            slot.close(
                float(params.value("pmca_base_modex_timeout")),
                after_error=self._after_error,
                finalize_timeout=float(params.value("pmca_base_finalize_timeout")),
            )
        except BaseException as exc:
            return [exc]
        return []

    def __enter__(self) -> Self:
        return self.init()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        if self._state is _State.ACTIVE:
            self._after_error = exc_type is not None
            self.finalize()

    @property
    def active(self) -> bool:
        return self._state is _State.ACTIVE

    # -- queries ----------------------------------------------------------------

    def _framework(self, name: str) -> OpenFramework:
        if self._state is not _State.ACTIVE:
            raise SessionError(f"session is {self._state.value}; it cannot be used")
        state = self._runtime.frameworks.get(name)
        if state is None:
            raise FrameworkError(f"framework {name!r} is not open")
        if state.unsettled:
            # First use of a btl opened for a world of one rank: like a transition,
            # so a concurrent finalize waits for it (or has already run).
            with self._runtime.lock, deferred_interrupts():
                self._require_active()
                state.settle()
        return state

    def framework(self, name: str) -> FrameworkHandle:
        """An open framework: its own hooks (``.hook``), modules and components."""
        state = self._framework(name)
        return FrameworkHandle(state, lambda: self._framework(name))

    def modules(self, framework: str) -> list[object]:
        """The selected modules of ``framework``, best first.

        btl modules come connected to the world's ranks (``add_procs`` done):
        in a world of one rank, asking for them builds the data path.
        """
        opened = self._framework(framework)
        if framework == "btl" and self._slot is not None and self._slot.connected is None:
            self._connected()
        return opened.modules()

    def module(self, framework: str) -> object:
        """The selected module of a ``single`` framework."""
        return self._framework(framework).module()

    def components(self, framework: str) -> list[ComponentInfo]:
        """The components kept open by ``framework`` after selection."""
        return self._framework(framework).infos()

    def failures(self, framework: str) -> list[Any]:
        """Components of ``framework`` that failed and were skipped, with why."""
        return list(self._framework(framework).failures)

    def _data_slot(self) -> DataPathSlot:
        self._require_active()
        slot = self._slot
        if slot is None:
            if self._data_closing:
                raise SessionError(
                    "session is finalizing: its data path (p2p, reach) accepts nothing new"
                )
            raise FrameworkError(
                "this session has no data path: open the btl framework "
                "(frameworks=None or including 'btl')"
            )
        return slot

    def _first_use(
        self, built: Callable[[DataPathSlot], _T | None], build: Callable[[DataPathSlot], _T]
    ) -> _T:
        """What ``built`` finds on the data path, else what ``build`` makes (once)."""
        found = built(self._data_slot())
        if found is not None:
            return found
        # First use in a world of one rank: built like a transition, so a
        # concurrent finalize waits for it (or has already run).
        with self._runtime.lock, deferred_interrupts():
            return build(self._data_slot())

    def _connected(self) -> Bml:
        """The btl modules connected to the world's ranks (built at first use)."""
        return self._first_use(lambda slot: slot.connected, lambda slot: slot.connect())

    def _data_path(self) -> DataPath:
        """The connected btl modules with the message layer on them (built at first use)."""
        return self._first_use(lambda slot: slot.built, lambda slot: slot.get())

    @property
    def world(self) -> World | None:
        """The world this session exchanged addresses with (``None`` without btl)."""
        return self._world

    @property
    def p2p(self) -> P2p:
        """Point-to-point messages to the ranks of :attr:`world`."""
        return self._data_path().p2p

    def reach(self, peer: int) -> list[str]:
        """The btl components that reach rank ``peer``, best first."""
        from ..btl.bml._ranks import check_rank

        bml = self._connected()
        return bml.reach(check_rank(peer, len(bml.peers), "Session.reach"))

    def param(self, name: str) -> Param:
        """A parameter, with its value and where the value came from."""
        self._require_active()
        runtime = self._runtime
        try:
            return runtime.params.get(name)
        except UnknownParamError as exc:
            from ..runtime._unknown import unregistered_reason

            with runtime.lock:
                reason = unregistered_reason(name, runtime.frameworks, runtime.catalog.frameworks)
            if reason is None:
                raise
            raise UnknownParamError(name, exc.close_matches, reason) from None

    def set_param(self, name: str, value: Any) -> Param:
        """Change a settable parameter at run time (source ``set``)."""
        self._require_active()
        return self._runtime.params.set(name, value)

    # -- performance variables (MPI_T) --------------------------------------------

    def pvars(self) -> list[PVar]:
        """Every performance variable registered in this process, by name."""
        self._require_active()
        return REGISTRY.pvars()

    def pvar_session(self) -> PVarSession:
        """A new pvar session: ``ps.handle(name, obj=None)`` gives start/stop/read handles."""
        self._require_active()
        from ._pvar_declare import declare_listed

        return PVarSession(REGISTRY, declare=declare_listed)

    def event_types(self) -> list[EventType]:
        """Every event type declared in this process (name, fields, level), by name."""
        self._require_active()
        return EVENTS.types()

    def register_event(
        self, name: str, callback: EventCallback, safety: Safety = Safety.NONE
    ) -> EventRegistration:
        """Call ``callback(name, fields)`` for each event ``name`` where ``safety`` allows."""
        self._require_active()
        return EVENTS.register(name, callback, safety)

    def _require_active(self) -> None:
        if self._state is not _State.ACTIVE:
            raise SessionError(f"session is {self._state.value}; it cannot be used")

    def __repr__(self) -> str:
        return f"<pmca.Session {self._state.value} frameworks={self._opened}>"


#: The live view the first session opened (closed by the last finalize).
_LIVE: list[LiveView] = []


def _open_live_view(runtime: Runtime) -> None:
    setting = str(runtime.params.value("pmca_base_live_view"))
    if _LIVE or setting == "off":
        return
    from .._job import wanted

    if not wanted(setting, os.environ):
        return
    from ._live import LiveView  # sockets and json only when it is on

    try:
        _LIVE.append(LiveView(os.environ))
    except (OSError, PmcaError) as exc:  # a tool's window never stops the program
        warnings.warn(f"pmca live view not opened: {exc}", RuntimeWarning, stacklevel=3)


def _name_job(live: LiveView, world: World) -> None:
    """Let the live view answer to the name the world prints for the job.

    The world prints the live view's name for the job first (under Hydra
    ``pmi-<proxy pid>``, from the environment), then the launcher's own
    where it differs (``kvs kvs_...`` for PMI-1, a PMI-2 or PMIx job id):
    ``pmca stats --job`` takes either.
    """
    for attribute in ("jobid", "kvsname"):  # PMIx and PMI-2 worlds, PMI-1 worlds
        name = getattr(world, attribute, None)
        if isinstance(name, str) and name:
            live.also_known_as(name)
            return


def _close_live_view() -> None:
    while _LIVE:
        _LIVE.pop().close()


def finalize_at_exit(runtime: Runtime = RUNTIME) -> None:
    """At interpreter exit, leave libc as pmca found it.

    Sessions still active are finalized, last started first, as if the
    program had done it. A fork child does not run its parent's component
    close hooks (they could release what the parent still uses, such as
    shared segments): it only restores the patches in its own memory.
    """
    from ..patcher import restore_all

    if not runtime.live:
        return
    if os.getpid() == runtime.pid and runtime.unusable is None:
        # A daemon thread may still be inside a transition: wait for it, a while.
        if runtime.lock.acquire(timeout=TRANSITION_WAIT):
            try:
                _finalize_live(runtime)
            finally:
                runtime.lock.release()
        else:
            print(
                "pmca: at exit, another thread stayed inside a session transition; "
                "restoring libc without finalizing",
                file=sys.stderr,
            )
    try:
        restore_all()
    except BaseException as exc:  # exiting: report and go on
        print(f"pmca: restoring libc at exit: {exc!r}", file=sys.stderr)


def _finalize_live(runtime: Runtime) -> None:
    for session in reversed(list(runtime.live)):
        warnings.warn(
            f"{session!r} was still active at interpreter exit; finalizing it",
            ResourceWarning,
            stacklevel=1,
        )
        try:
            session._after_error = True  # never finalized by the program: its peers may wait
            session.finalize()
        except BaseException as exc:  # exiting: report and go on
            print(f"pmca: finalize at exit: {exc!r}", file=sys.stderr)


atexit.register(finalize_at_exit)
