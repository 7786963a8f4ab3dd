"""The process-wide runtime behind every session.

Sessions are handles; the runtime holds what they share: the parameter
space, the open frameworks with their reference counts and the finalize
domains. The first session's init builds it, the last session's finalize
tears it down, and the next init builds it anew (Open MPI's
``sessions_init_twice``).

Fork: the runtime lock is held across whole transitions (which call
component code), so it is taken before every ``fork()`` and released on
both sides: a child never inherits a transition half-done by another
thread. If a transition does not end within :data:`TRANSITION_WAIT` seconds (it
waits for the very thread that forks, say), the fork goes ahead and pmca
refuses to start sessions in that child, saying why.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING, Any

from .._interrupts import deferred_interrupts
from .._public import public
from ..mca._discovery import EntryPointIndex
from ..mca._errors import FrameworkError, SessionError, StaleReferenceError, warn_user
from ..mca._loader import LoadModeSpec
from ..mca._logging import framework_logger
from ..mca._open import OpenFramework
from ..mca._stale import find_stale_references, package_of
from ..mca.params import ParamSpace, ParamWarning
from ._catalog import Catalog
from ._core_params import register_core_params
from ._domains import FinalizeDomain
from ._unknown import Namespace, unknown_name_messages

if TYPE_CHECKING:
    from ..mca._failures import ComponentFailure
    from ._failures import CleanupFailure

#: How long a ``fork()``, or the exit handler, waits for a transition in another thread.
TRANSITION_WAIT = 10.0


#: Unknown parameter names warned about one by one; the rest in one warning.
UNKNOWN_WARNINGS = 20


@public
class Runtime:
    """Shared state of all live sessions in this process."""

    def __init__(self) -> None:
        self.lock = threading.RLock()
        self._held_for_fork = False
        #: Why sessions cannot start in this process (a fork child that
        #: inherited a transition in flight); ``None`` when they can.
        self.unusable: str | None = None
        self._space: ParamSpace | None = None
        self._catalog: Catalog | None = None
        self.sessions = 0
        #: Active sessions, oldest first (finalized at interpreter exit).
        self.live: list[Any] = []
        #: The process that built the current parameter space.
        self.pid = os.getpid()
        self.frameworks: dict[str, OpenFramework] = {}
        self.core_domain = FinalizeDomain("pmca core")
        self.stale: list[str] = []
        self.close_failures: list[ComponentFailure] = []
        self.cleanup_failures: list[CleanupFailure] = []
        #: ``("open" | "close", framework)`` in the order it happened, this epoch.
        self.history: list[tuple[str, str]] = []
        self._opening: list[str] = []
        self._departed: list[tuple[str, object]] = []
        self._closing = 0
        #: Top-level packages scanned for stale references: pmca and every
        #: package a component came from (third-party plugins included).
        self.scanned_packages: set[str] = {"pmca"}
        #: ``mca_base_component_stale_check`` as of the last init.
        self.stale_check = "error"
        #: Unknown parameter names already warned about, for the space of this epoch.
        self._warned_unknown: tuple[ParamSpace | None, set[str]] = (None, set())

    # -- services for open frameworks and components -------------------------

    @property
    def params(self) -> ParamSpace:
        if self._space is None:
            raise SessionError("no pmca session is initialized in this process")
        return self._space

    @property
    def catalog(self) -> Catalog:
        if self._catalog is None:
            raise SessionError("no pmca session is initialized in this process")
        return self._catalog

    def component_path(self) -> list[str]:
        value = self.params.value("mca_base_component_path")
        return [part for part in str(value or "").split(":") if part]

    def entry_points(self) -> EntryPointIndex:
        return self.catalog.entry_points

    def load_mode_specs(self) -> tuple[LoadModeSpec, LoadModeSpec]:
        return (
            LoadModeSpec.parse(
                self.params.value("mca_base_component_dso"), parameter="mca_base_component_dso"
            ),
            LoadModeSpec.parse(
                self.params.value("mca_base_component_static"),
                parameter="mca_base_component_static",
            ),
        )

    def departed(self, what: str, objects: list[object]) -> None:
        """Note objects of a closed component; checked in one pass by ``_check_departed()``."""
        self._departed.extend((what, obj) for obj in objects)
        self._scan_packages_of(objects)

    def _scan_packages_of(self, objects: list[object]) -> None:
        self.scanned_packages.update(p for p in map(package_of, objects) if p is not None)

    def _check_departed(self) -> None:
        """Scan for references to what closed since the last scan: once per finalize."""
        departed, self._departed = self._departed, []
        if not departed or self.stale_check == "none":
            return
        owner = {id(obj): what for what, obj in departed}
        found = find_stale_references((obj for _, obj in departed), packages=self.scanned_packages)
        for reference, referent in found:
            message = f"{reference} still refers to {owner[referent]} after it was closed"
            if self.stale_check == "warn":
                framework_logger("mca", 0).error(message)
            else:
                self.stale.append(message)

    def open_framework(self, name: str, *, defer_selection: bool = False) -> OpenFramework:
        """Open ``name`` (after its dependencies) or take another reference.

        ``defer_selection`` loads and registers its components but leaves
        opening and querying them to :meth:`pmca.mca.OpenFramework.settle` (taking a
        reference without it settles a framework opened that way). When it
        raises (``KeyboardInterrupt`` included), no reference is taken.
        """
        opened: list[OpenFramework] = []
        try:
            with self.lock, deferred_interrupts():
                opened.append(self._open_framework(name, defer_selection))
        except BaseException:
            if opened:  # interrupted after the open: the caller never sees it
                self.close_framework(name)
            raise
        return opened[0]

    def _open_framework(self, name: str, defer_selection: bool = False) -> OpenFramework:
        with self.lock:
            state = self.frameworks.get(name)
            if state is not None:
                state.refcount += 1
                if not defer_selection:
                    try:
                        state.settle()
                    except BaseException:
                        state.refcount -= 1
                        raise
                return state
            if name in self._opening:
                cycle = " -> ".join([*self._opening, name])
                raise FrameworkError(f"framework {name!r} opened while opening itself: {cycle}")
            framework = self.catalog.get(
                name, needed_by=self._opening[-1] if self._opening else None
            )
            opened_dependencies: list[str] = []
            self._opening.append(name)
            try:
                for dependency in framework.depends:
                    self._open_framework(dependency)
                    opened_dependencies.append(dependency)
                state = OpenFramework(framework, self)
                state.refcount = 1
                try:
                    self.frameworks[name] = state
                    state.open(defer_selection=defer_selection)
                    self._scan_packages_of([lc.component for lc in state.loaded])
                    self._introduce(state)
                except BaseException:
                    if self.frameworks.pop(name, None) is state and state.base is not None:
                        self.close_failures.extend(state.close())
                    raise
                self.history.append(("open", name))
                return state
            except BaseException:
                for dependency in reversed(opened_dependencies):
                    self.close_framework(dependency)
                raise
            finally:
                self._opening.pop()

    def settled(self, framework: OpenFramework) -> None:
        with self.lock:
            self._introduce(framework)

    def _introduce(self, state: OpenFramework) -> None:
        """Let the new framework's base and the others' bases see each other.

        A framework whose selection is deferred is introduced when it settles,
        so that the others see the components it really selected.
        """
        if state.unsettled:
            return
        for other in list(self.frameworks.values()):
            if other is state or other.unsettled:
                continue
            for base, peer in ((other.base, state), (state.base, other)):
                if base is not None:
                    base.peer_opened(peer)

    def close_framework(self, name: str) -> None:
        """Drop a reference; the last one closes the framework, then its dependencies."""
        with self.lock, deferred_interrupts():
            self._closing += 1
            try:
                self._close_framework(name)
            finally:
                self._closing -= 1

    def _close_framework(self, name: str) -> None:
        with self.lock:
            state = self.frameworks.get(name)
            if state is None:
                raise FrameworkError(f"framework {name!r} is not open")
            state.refcount -= 1
            if state.refcount > 0:
                return
            del self.frameworks[name]
            # Recorded as the close begins: frameworks its components opened
            # close inside it, mirroring how they opened inside its open.
            self.history.append(("close", name))
            try:
                self.close_failures.extend(state.close())
            finally:  # even when a hook raised a BaseException through the close
                for dependency in reversed(state.framework.depends):
                    self.close_framework(dependency)

    def warn_unknown_names(self, also: Iterable[OpenFramework] = ()) -> None:
        """Warn once per epoch about given names no open framework has (typos).

        ``also``: frameworks registered for the check without being open
        (see :func:`pmca.runtime._inventory.check_given_names`).
        """
        with self.lock:
            space = self.params
            states = {**self.frameworks, **{state.name: state for state in also}}
            namespaces = {
                name: Namespace(
                    frozenset(p.full_name for p in space.params(name, "base")),
                    frozenset(state.found),
                    {c: frozenset(names) for c, names in state.registered.items()},
                )
                for name, state in states.items()
            }
            disabled = self.catalog.disabled()
            disabled.extend(n for n in self.catalog.frameworks if n not in states)
            complete = set(self.catalog.frameworks) <= set(states)
            messages = unknown_name_messages(space, namespaces, disabled, complete=complete)
            if self._warned_unknown[0] is not space:  # a new epoch: warn afresh
                self._warned_unknown = (space, set())
            warned = self._warned_unknown[1]
            fresh = [name for name in messages if name not in warned]
            warned.update(fresh)
            for name in fresh[:UNKNOWN_WARNINGS]:
                warn_user(ParamWarning(messages[name]))
            if len(fresh) > UNKNOWN_WARNINGS:  # one line for the rest, not thousands
                rest = fresh[UNKNOWN_WARNINGS:]
                warn_user(
                    ParamWarning(
                        f"{len(rest)} more unknown MCA parameters are ignored "
                        f"({', '.join(repr(n) for n in rest[:3])}, ...)"
                    )
                )

    # -- session support -----------------------------------------------------

    @staticmethod
    def read_params(mca: Mapping[str, Any]) -> ParamSpace:
        """A parameter space with its environment and files read; takes no lock.

        Parameter files are user input (a FIFO, a slow file system): they
        are read before the runtime lock is taken, so a blocked read never
        stalls other threads' transitions.
        """
        space = ParamSpace(api=dict(mca))
        register_core_params(space)
        return space

    def attach(self, session: Any, mca: Mapping[str, Any], space: ParamSpace | None = None) -> None:
        """Count ``session`` in (and mark it attached); the first one builds the
        parameter space.

        ``space`` is the one :meth:`read_params` built for this session;
        the first session adopts it.
        """
        with self.lock:
            if self.unusable is not None:
                raise SessionError(self.unusable)
            if self.sessions == 0:
                try:
                    self._build(space if space is not None else self.read_params(mca))
                except BaseException:  # a second Ctrl-C, say: nothing of the build stays
                    self._space = self._catalog = None
                    raise
            else:
                self._check_compatible(mca)
            self.sessions += 1
            session._attached = True  # with the count: see detach()

    def detach(self, session: Any) -> None:
        """Count ``session`` out; the last one tears everything down.

        ``session._attached`` is cleared in the same step as the count, with no
        call in between, so that an interrupt never leaves them disagreeing.
        """
        with self.lock:
            if not session._attached:
                return
            session._attached = False
            self.sessions -= 1
            if self.sessions > 0:
                self._check_departed()  # once per finalize, over what closed since the last
                return
            # The space goes even when an interrupt (a second Ctrl-C) cuts this short.
            try:
                self._check_departed()
                failures = self.core_domain.run()
            finally:
                try:
                    self._teardown()
                finally:
                    self._space = self._catalog = None
            self.cleanup_failures.extend(failures)
            self._check_departed()
            for failure in failures:
                if not isinstance(failure.error, Exception):
                    raise failure.error  # SystemExit and the like, once all is torn down
            stale, self.stale = self.stale, []
            if stale:
                raise StaleReferenceError(
                    "stale references to closed components:\n  " + "\n  ".join(stale)
                )

    def _build(self, space: ParamSpace) -> None:
        catalog = Catalog.discover()
        catalog.check_names(space)
        self._space = space
        self._catalog = catalog
        self.stale_check = space.get("mca_base_component_stale_check").value_string()
        self.pid = os.getpid()
        self.history = []
        self.close_failures = []
        self.cleanup_failures = []

    def _teardown(self) -> None:
        """Close what the sessions left open (after the core domain's cleanups)."""
        leftover = list(self.frameworks)
        for name in reversed(leftover):
            state = self.frameworks.get(name)
            if state is not None:
                state.refcount = 1
                self.close_framework(name)

    def _check_compatible(self, mca: Mapping[str, Any]) -> None:
        space = self.params
        for name, wanted in mca.items():
            space.add_api_value(name, wanted)

    # -- fork ------------------------------------------------------------------

    def before_fork(self) -> None:
        self._held_for_fork = self.lock.acquire(timeout=TRANSITION_WAIT)

    def after_fork_in_parent(self) -> None:
        if self._held_for_fork:
            self._held_for_fork = False
            self.lock.release()

    def after_fork_in_child(self) -> None:
        if self._held_for_fork:
            self._held_for_fork = False
            self.lock.release()
            return
        # Another thread was inside a transition that did not end in time:
        # its state is half-made here and that thread does not exist.
        self.lock = threading.RLock()
        self.unusable = (
            f"this process (pid {os.getpid()}) was forked while another thread was in a pmca "
            f"session init/finalize that did not end within {TRANSITION_WAIT:g} s; pmca's state "
            f"in this child is incomplete and no session can start here"
        )


#: The one runtime of this process.
RUNTIME = Runtime()
os.register_at_fork(
    before=RUNTIME.before_fork,
    after_in_parent=RUNTIME.after_fork_in_parent,
    after_in_child=RUNTIME.after_fork_in_child,
)
