"""``pmca.Session``: one handle on the shared runtime (Open MPI's MPI_Session)."""

from __future__ import annotations

import enum
from collections.abc import Mapping, Sequence
from types import TracebackType
from typing import TYPE_CHECKING, Any

from ..mca._errors import FrameworkError, SessionError
from ..mca._open import ComponentInfo, OpenFramework
from ..mca.params import ParamError
from ._domains import FinalizeDomain
from ._handle import FrameworkHandle
from ._runtime import RUNTIME, Runtime

if TYPE_CHECKING:
    from typing_extensions import Self

    from ..mca.params import Param
    from ..p2p import P2p
    from ..p2p._attach import DataPath
    from ..world import World


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


class _State(enum.Enum):
    NEW = "new"
    ACTIVE = "active"
    FINALIZED = "finalized"


class Session:
    """A handle whose init opens frameworks and whose finalize closes them.

    Several sessions may be alive at once: the first init builds the shared
    parameter space, each session takes references on the frameworks it
    asks for, and the last finalize tears everything down.

    :param mca: parameter values with the priority of the command line.
    :param frameworks: the frameworks to open (with their dependencies);
        ``None`` opens every installed framework.
    :param world: the processes to exchange btl addresses with (one
        allgather at init); default :func:`pmca.world.single`.
    """

    def __init__(
        self,
        mca: Mapping[str, Any] | None = None,
        frameworks: Sequence[str] | None = None,
        *,
        world: World | None = None,
        _runtime: Runtime | None = None,
    ) -> None:
        self._mca = _checked_mca(mca)
        self._requested = _checked_frameworks(frameworks)
        self._runtime = _runtime or RUNTIME
        self._state = _State.NEW
        self._opened: list[str] = []
        self._world = world
        self._data: DataPath | None = None
        #: Cleanups run at this session's finalize, last registered first.
        self.domain = FinalizeDomain("session")

    # -- lifecycle ------------------------------------------------------------

    def init(self) -> Self:
        runtime = self._runtime
        with runtime.lock:
            if self._state is _State.ACTIVE:
                raise SessionError("session is already initialized")
            if self._state is _State.FINALIZED:
                raise SessionError("session was finalized; create a new pmca.Session")
            runtime.attach(self._mca)
            try:
                names = self._requested
                if names is None:
                    names = list(runtime.catalog.frameworks)
                for name in runtime.catalog.dependency_order(names):
                    runtime.open_framework(name)
                    self._opened.append(name)
                runtime.warn_unknown_names()
                self._data = self._attach_data_path()
            except BaseException:
                self._close_data_path()
                self._close_frameworks()
                runtime.detach()
                self._state = _State.FINALIZED
                raise
            self._state = _State.ACTIVE
        return self

    def finalize(self) -> None:
        runtime = self._runtime
        with runtime.lock:
            if self._state is _State.FINALIZED:
                raise SessionError("session was already finalized")
            if self._state is _State.NEW:
                raise SessionError("session was never initialized")
            self._state = _State.FINALIZED
            errors = self._close_data_path()
            errors.extend(self._close_frameworks())
            errors.extend(failure.error for failure in self.domain.run())
            try:
                runtime.detach()
            except Exception as exc:
                errors.append(exc)
        if len(errors) == 1:
            raise errors[0]
        if errors:
            raise SessionError(
                f"finalize met {len(errors)} errors: " + "; ".join(repr(e) for e in errors)
            ) from errors[0]

    def _attach_data_path(self) -> DataPath | None:
        """Modex and connections for the btl framework, if this session opened it."""
        from ..p2p._attach import attach
        from ..world import single

        btl = self._runtime.frameworks.get("btl")
        if "btl" not in self._opened or btl is None:
            return None
        if self._world is None:
            self._world = single()
        timeout = float(self._runtime.params.value("pmca_base_modex_timeout"))
        return attach(btl, self._world, timeout)

    def _close_data_path(self) -> list[BaseException]:
        data, self._data = self._data, None
        if data is None:
            return []
        try:
            data.close(float(self._runtime.params.value("pmca_base_modex_timeout")))
        except Exception as exc:
            return [exc]
        return []

    def _close_frameworks(self) -> list[BaseException]:
        errors: list[BaseException] = []
        while self._opened:
            name = self._opened.pop()
            try:
                self._runtime.close_framework(name)
            except Exception as exc:
                errors.append(exc)
        return errors

    def __enter__(self) -> Self:
        return self.init()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        if self._state is _State.ACTIVE:
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
        return state

    def framework(self, name: str) -> FrameworkHandle:
        """An open framework: its own hooks (``.hook``), modules and components."""
        state = self._framework(name)
        return FrameworkHandle(state, lambda: self._framework(name))

    def modules(self, framework: str) -> list[object]:
        """The selected modules of ``framework``, best first."""
        return self._framework(framework).modules

    def module(self, framework: str) -> object:
        """The selected module of a ``single`` framework."""
        return self._framework(framework).module()

    def components(self, framework: str) -> list[ComponentInfo]:
        """The components kept open by ``framework`` after selection."""
        return self._framework(framework).infos()

    def failures(self, framework: str) -> list[Any]:
        """Components of ``framework`` that failed and were skipped, with why."""
        return list(self._framework(framework).failures)

    def _data_path(self) -> DataPath:
        self._require_active()
        if self._data is None:
            raise FrameworkError(
                "this session has no data path: open the btl framework "
                "(frameworks=None or including 'btl')"
            )
        return self._data

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
        return self._data_path().bml.reach(peer)

    def param(self, name: str) -> Param:
        """A parameter, with its value and where the value came from."""
        self._require_active()
        return self._runtime.params.get(name)

    def set_param(self, name: str, value: Any) -> Param:
        """Change a settable parameter at run time (source ``set``)."""
        self._require_active()
        return self._runtime.params.set(name, value)

    def _require_active(self) -> None:
        if self._state is not _State.ACTIVE:
            raise SessionError(f"session is {self._state.value}; it cannot be used")

    def __repr__(self) -> str:
        return f"<pmca.Session {self._state.value} frameworks={self._opened}>"
