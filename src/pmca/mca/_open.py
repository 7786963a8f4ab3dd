"""One open framework: its components from discovery to close.

The sequence follows Open MPI's ``mca_base_framework_open`` and
``mca_base_select``: register the framework's parameters, find components,
filter them by name before import, load and register them, lock the
framework's parameters, open them, query them, keep the winners and close the
rest. Every hook call is isolated: a component that fails is recorded and
unloaded, and nothing else is disturbed.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from itertools import islice
from typing import TYPE_CHECKING, Any, Protocol

import pluggy
from attrs import define

from .._forksafe import short_lock
from .._public import public
from .._records import Record
from ._component import Component, Query, check_api, make_component
from ._context import ComponentContext, FrameworkHost, FrameworkParams
from ._discovery import Candidate, Discovered, EntryPointIndex
from ._errors import FrameworkError, NotAvailable
from ._events import component_failed, component_selected
from ._framework import Framework, FrameworkBase
from ._framework_params import admitted_components, framework_log, register_framework_params
from ._lifecycle import ComponentLifecycle
from ._load_errors import show_load_errors_matches
from ._loader import LoadMode, LoadModeSpec, choose_load_mode, purge_modules
from ._logging import framework_logger
from ._markers import PROJECT
from ._module_list import ModuleList
from ._plugins import ComponentManager
from ._selection import Selection
from .params import ParamValueError, Source

if TYPE_CHECKING:
    from structlog.typing import FilteringBoundLogger

    from ._component_info import ComponentInfo
    from ._failures import ComponentFailure


class OpenHost(FrameworkHost, Protocol):
    """What an open framework needs from the runtime that owns it."""

    def component_path(self) -> list[str]: ...

    def entry_points(self) -> EntryPointIndex: ...

    def load_mode_specs(self) -> tuple[LoadModeSpec, LoadModeSpec]: ...

    def departed(self, what: str, objects: list[object]) -> None: ...

    def settled(self, framework: OpenFramework) -> None:
        """A framework opened with its selection deferred has now selected."""


#: Components known to force static loading, learnt at their first import, so
#: that a later dso-mode open never purges a resident component's modules.
_forced_static: set[tuple[str, str]] = set()
_forced_static_lock = short_lock()


@define(eq=False, repr=False)
class LoadedComponent(Record):
    """A component imported and registered by an open framework."""

    candidate: Candidate
    component: Component
    load_mode: LoadMode
    context: ComponentContext
    #: The module (and submodules) a dso load owns; fixed at import time.
    module_root: str
    owned_modules: tuple[str, ...]
    priority: int | None = None
    module: object | None = None


class _ModulesMark:
    """Which modules an import added, without copying ``sys.modules`` each time.

    ``sys.modules`` keeps insertion order, so what an import adds is its
    tail. If a module before the mark left meanwhile, the tail is not
    trustworthy and every name is checked against ``known``, the one
    snapshot an open takes (kept up to date with what each mark reports).
    """

    def __init__(self, known: set[str]) -> None:
        self._known = known
        self._size = len(sys.modules)
        self._last = next(reversed(sys.modules)) if sys.modules else None

    def added(self) -> list[str]:
        size = self._size
        if size and next(islice(sys.modules, size - 1, None), None) != self._last:
            added = [name for name in sys.modules if name not in self._known]
        else:
            added = [name for name in islice(sys.modules, size, None) if name not in self._known]
        self._known.update(added)
        return added


@public
class OpenFramework:
    """The live state of one framework between its first open and last close."""

    def __init__(self, framework: Framework, host: OpenHost) -> None:
        self.framework = framework
        self.name = framework.name
        self.host = host
        self.refcount = 0
        self.pm = ComponentManager(PROJECT)
        self.pm.add_hookspecs(ComponentLifecycle)
        if framework.interface is not None:
            self.pm.add_hookspecs(framework.interface)
        self.loaded: list[LoadedComponent] = []
        self.failures: list[ComponentFailure] = []
        #: Components that said they cannot work here, with their reason.
        self.not_available: dict[str, str] = {}
        #: Every component whose ``register`` ran, with the parameter names it registered.
        self.registered: dict[str, set[str]] = {}
        #: Every component found, by name (imported or not).
        self.found: set[str] = set()
        #: The components the selection parameter names explicitly (include lists).
        self.requested: tuple[str, ...] = ()
        #: Requested components that dropped out (not available, or declined), with why.
        self.declined: dict[str, str] = {}
        #: Every component that dropped out (not available, or declined), with why.
        self.dropped: dict[str, str] = {}
        self.log: FilteringBoundLogger = framework_logger(self.name, 0)
        #: Opened with its selection deferred: components loaded and registered,
        #: not yet opened nor queried (see :meth:`settle`).
        self.unsettled = False
        #: ``sys.modules`` as of this open, for :class:`_ModulesMark`.
        self._known_modules: set[str] = set()
        self.base: FrameworkBase | None = None

    # -- public views -------------------------------------------------------

    @property
    def selected(self) -> list[LoadedComponent]:
        """The components kept after selection, best first (none before :meth:`settle`)."""
        return [] if self.unsettled else list(self.loaded)

    @property
    def modules(self) -> ModuleList:
        """``modules()``: the selected modules, best first (as ``FrameworkHandle.modules()``).

        Reading it as a list without the call still works, with a
        :class:`DeprecationWarning`.
        """
        return ModuleList(lc.module for lc in self.loaded if lc.module is not None)

    def module(self) -> object:
        """The selected module of a ``single`` framework."""
        modules = self.modules()
        if not modules:
            why = self._why_none()
            raise FrameworkError(f"framework {self.name!r} has no selected module{why}")
        return modules[0]

    def _why_none(self) -> str:
        """What pmca knows of why no component is selected: each failure and decline."""
        reasons = sorted(
            [
                *((f.component, f.reason) for f in self.failures),
                *self.dropped.items(),
            ]
        )
        if not reasons:
            return ""
        return ": " + "; ".join(f"{self.name}/{name}: {why}" for name, why in reasons)

    def infos(self) -> list[ComponentInfo]:
        from ._component_info import ComponentInfo

        return [
            ComponentInfo(
                self.name,
                lc.component.name,
                lc.component.version,
                lc.component.api_version,
                lc.load_mode,
                lc.candidate.location,
                lc.candidate.distribution,
                lc.priority,
                lc.module is not None,
            )
            for lc in self.loaded
        ]

    def hook(self) -> pluggy.HookRelay:
        """The framework's own hooks, implemented by the selected components."""
        return self.pm.hook

    # -- open ---------------------------------------------------------------

    def open(self, *, defer_selection: bool = False) -> None:
        """Register, discover, load, open and select. Raises only for bad input.

        With ``defer_selection``, stop once the components are loaded and their
        parameters registered: :meth:`settle` opens and queries them later.
        """
        try:
            selection, discovered = self._prepare()
            skipped = 0
            for name, candidate in discovered.candidates.items():
                if selection.admits(name):
                    self._load(candidate)
                else:
                    skipped += 1
            if skipped:
                self.log.debug("components not selected, not imported", count=skipped)
            self.host.params.lock(self.name, keep={f"{self.name}_base_verbose"})
            if defer_selection:
                self.unsettled = True
                self.log.debug(
                    "selection deferred to first use",
                    loaded=[lc.component.name for lc in self.loaded],
                )
                return
            self._open_and_select()
        except BaseException:
            self.close()
            raise

    def settle(self) -> None:
        """Open and query the components of a framework whose selection was deferred.

        Does nothing for a framework already selected. Component failures are
        recorded as at open; only a failing framework base raises.
        """
        if self.unsettled:
            self.unsettled = False
            self._open_and_select()
            self.host.settled(self)

    def _open_and_select(self) -> None:
        for loaded in list(self.loaded):
            self._open_component(loaded)
        self._select()
        assert self.base is not None
        self.base.opened()
        self.log.info("framework opened", selected=[lc.component.name for lc in self.loaded])

    def register_all(self, *, isolate: bool = False) -> dict[str, bool]:
        """``pmca info``'s view: register every component, open none.

        Returns, for each component name found, whether the selection
        parameter admits it (``ompi_info`` marks the others ``(-)``). Call
        :meth:`unload_all` afterwards. ``isolate``: import each third-party
        component in a child process first; one whose import kills it is a
        failure naming it, and is not imported here.
        """
        selection, discovered = self._prepare()
        crashed: dict[str, str] = {}
        if isolate:
            from ._isolate import ComponentCrashed, crashed_imports

            crashed = crashed_imports(discovered.candidates.values())
        for candidate in discovered.candidates.values():
            if candidate.name in crashed:
                self._fail(candidate, "import", ComponentCrashed(crashed[candidate.name]))
                continue
            self._load(candidate)
        return {name: selection.admits(name) for name in discovered.candidates}

    def unload_all(self) -> None:
        """Undo :meth:`register_all` without calling any component hook."""
        for loaded in reversed(list(self.loaded)):
            self._unload(loaded)
        self.host.params.deregister_group(self.name)
        self.base = None

    def _prepare(self) -> tuple[Selection, Discovered]:
        """Register the framework's parameters and base; find its components by name."""
        space = self.host.params
        # Before the snapshot: a base named by a string is imported now, and its
        # modules are pmca's, not the first component's.
        base = self.framework.base_class()
        self._known_modules = set(sys.modules)
        register_framework_params(space, self.name)
        self.log = framework_log(space, self.name)
        self.base = base(self)
        self.base.register_params(FrameworkParams(space, self.name))
        selection, discovered = admitted_components(
            self.framework, space, self.host.component_path(), self.host.entry_points(), self.log
        )
        self.found = set(discovered.candidates)
        self.requested = () if selection.exclude else selection.names
        return selection, discovered

    def _load(self, candidate: Candidate) -> None:
        dso_spec, static_spec = self.host.load_mode_specs()
        key = (self.name, candidate.name)
        mode = choose_load_mode(
            self.name,
            candidate.name,
            dso=dso_spec,
            static=static_spec,
            forced_static=not self.framework.allow_dso
            or candidate.force_static
            or key in _forced_static,
        )
        root = candidate.module_root
        if mode == "dso":
            purge_modules(root)
        mark = _ModulesMark(self._known_modules)
        try:
            obj = candidate.load()
        except Exception as exc:
            self._load_failed(candidate, "import", exc, root if mode == "dso" else None)
            return
        try:
            component = make_component(
                obj, expected_framework=self.name, expected_name=candidate.name
            )
            check_api(component, self.framework.name, self.framework.api_version)
            self.pm.register_detached(component, name=candidate.name)
            try:
                self.pm.check_known(component, self.name)
            except pluggy.PluginValidationError:
                self.pm.unregister(component)
                raise
        except Exception as exc:
            self._load_failed(candidate, "validate", exc, root if mode == "dso" else None)
            return
        if component.force_static and mode == "dso":
            with _forced_static_lock:
                _forced_static.add(key)
            mode = "static"
        owned = tuple(name for name in mark.added() if name == root or name.startswith(root + "."))
        context = ComponentContext(
            self.host, self.name, candidate.name, mode, self.log.bind(component=candidate.name)
        )
        loaded = LoadedComponent(candidate, component, mode, context, root, owned)
        self.loaded.append(loaded)
        try:
            self._call(loaded, "register", params=context.params)
        except ParamValueError as exc:
            self._unload(loaded)
            if exc.origin.source is Source.DEFAULT:
                self._fail(candidate, "register", exc)  # the component's own default
                return
            raise  # the user's value: an error naming it, never a dropped component
        except Exception as exc:
            self._fail(candidate, "register", exc)
            self._unload(loaded)
            return
        self.registered[candidate.name] = {
            name
            for param in self.host.params.params(self.name, candidate.name)
            for name in (param.full_name, *(s.name for s in param.synonyms))
        }

    def _load_failed(
        self, candidate: Candidate, hook: str, error: Exception, purge_root: str | None
    ) -> None:
        self._fail(candidate, hook, error)
        if purge_root is not None:
            purge_modules(purge_root)

    def _open_component(self, loaded: LoadedComponent) -> None:
        reason = "open returned False"
        try:
            result = self._call(loaded, "open", ctx=loaded.context)
        except NotAvailable as exc:
            result, reason = False, str(exc) or type(exc).__name__
            loaded.context.log.debug("not available", reason=reason)
        except Exception as exc:
            self._fail(loaded.candidate, "open", exc)
            self._unload(loaded)
            return
        if result is False:
            self._declined(loaded.candidate.name, f"not available: {reason}")
            self.not_available[loaded.candidate.name] = reason
            self._unload(loaded)

    def _select(self) -> None:
        offers: list[LoadedComponent] = []
        for loaded in list(self.loaded):
            try:
                offer = self._call(loaded, "query", ctx=loaded.context)
                if offer is not None and not (
                    isinstance(offer, Query) and isinstance(offer.priority, int)
                ):
                    raise TypeError(f"query returned {offer!r}, expected pmca.Query or None")
            except Exception as exc:
                self._fail(loaded.candidate, "query", exc)
                self._close_component(loaded)
                continue
            if offer is None or offer.module is None:
                self._declined(loaded.candidate.name, "query returned None (declined selection)")
                self._close_component(loaded)
                continue
            loaded.priority, loaded.module = offer.priority, offer.module
            offers.append(loaded)
        offers.sort(key=lambda lc: lc.priority if lc.priority is not None else 0, reverse=True)
        keep = offers[:1] if self.framework.policy == "single" else offers
        for loser in offers[len(keep) :]:
            self.log.debug("not selected", component=loser.component.name, priority=loser.priority)
            self._close_component(loser)
        # Only now do the framework's hooks see a component: called in selection
        # order, best first, as Open MPI calls its modules.
        self.pm.attach_in_order([loaded.component for loaded in keep])
        for loaded in keep:
            component_selected(self.name, loaded.component.name, loaded.priority)
        self.loaded = keep
        self._report_declined()

    def _declined(self, name: str, why: str) -> None:
        """A component drops out: remembered, and reported when the user asked for it by name."""
        self.dropped[name] = why
        if name in self.requested:
            self.declined[name] = why
        self.log.debug("component not used", component=name, reason=why)

    def _report_declined(self) -> None:
        """The user named components that are not used: say which dropped out, and why.

        Shown at the default verbosity, even when another component is used
        (``btl=self,stub``): the user asked for it by name. A failed one is
        already reported as a failure.
        """
        for name, why in self.declined.items():
            self.log.error(
                "requested component is not used",
                component=name,
                reason=why,
                requested=f"{self.name}={','.join(self.requested)}",
            )

    # -- close --------------------------------------------------------------

    def close(self) -> list[ComponentFailure]:
        """Tear everything down; report failures and keep going.

        A hook that raises a ``BaseException`` (``KeyboardInterrupt``,
        ``SystemExit``) is recorded like any failure; the first such is
        raised again once everything is closed.
        """
        failures_before = len(self.failures)
        fatal: BaseException | None = None
        if self.base is not None:
            try:
                self.base.closing()
            except BaseException as exc:
                from ._failures import ComponentFailure

                self.failures.append(
                    ComponentFailure.capture(
                        framework=self.name,
                        component="base",
                        hook="close",
                        location=f"framework {self.name} base",
                        distribution=None,
                        error=exc,
                    )
                )
                self.log.error("framework base failed to close", error=repr(exc))
                fatal = _fatal(exc)
        # Components of a framework never settled were never opened: nothing to close.
        close = self._unload if self.unsettled else self._close_component
        self.unsettled = False
        for loaded in reversed(list(self.loaded)):
            try:
                close(loaded)
            except BaseException as exc:  # already recorded; the rest still close
                fatal = fatal or exc
        self.loaded = []
        space = self.host.params
        space.deregister_group(self.name)
        space.unlock(self.name)
        base, self.base = self.base, None
        if base is not None:
            self.host.departed(f"framework {self.name} base", [base])
        if fatal is not None:
            raise fatal
        return self.failures[failures_before:]

    def _close_component(self, loaded: LoadedComponent) -> None:
        fatal: BaseException | None = None
        try:
            self._call(loaded, "close", ctx=loaded.context)
        except BaseException as exc:
            self._fail(loaded.candidate, "close", exc)
            fatal = _fatal(exc)
        self._unload(loaded)
        if fatal is not None:
            raise fatal

    def _unload(self, loaded: LoadedComponent) -> None:
        """Release a component's resources, parameters and (dso) its modules.

        Raises the first ``BaseException`` met releasing, once all is done.
        """
        if loaded in self.loaded:
            self.loaded.remove(loaded)
        notes, errors = loaded.context.release()
        for note in notes:
            # Something was left behind and had to be undone: always shown.
            self.log.error(note, component=loaded.candidate.name)
        for error in errors:
            self._fail(loaded.candidate, "close", error)
        if self.pm.is_registered(loaded.component):
            self.pm.unregister(loaded.component)
        self.host.params.deregister_group(self.name, loaded.candidate.name)
        departed: list[object] = [loaded.component]
        if loaded.module is not None:
            departed.append(loaded.module)
        if loaded.load_mode == "dso":
            departed.extend(
                sys.modules[name] for name in loaded.owned_modules if name in sys.modules
            )
            purge_modules(loaded.module_root)
        loaded.module = None
        self.host.departed(f"component {self.name}/{loaded.candidate.name}", departed)
        fatal = next((error for error in errors if _fatal(error)), None)
        if fatal is not None:
            raise fatal

    # -- helpers ------------------------------------------------------------

    def _call(self, loaded: LoadedComponent, hook: str, **kwargs: Any) -> Any:
        """Call one component's implementation of a lifecycle hook."""
        impl = self.pm.implementation(loaded.component, hook)
        if impl is None:
            return None
        function: Callable[..., Any] = impl.function
        return function(*[kwargs[name] for name in impl.argnames])

    def _fail(self, candidate: Candidate, hook: str, error: BaseException) -> None:
        from ._failures import ComponentFailure

        failure = ComponentFailure.capture(
            framework=self.name,
            component=candidate.name,
            hook=hook,
            location=candidate.location,
            distribution=candidate.distribution,
            error=error,
        )
        self.failures.append(failure)
        component_failed(self.name, candidate.name, hook, error)
        setting = str(self.host.params.value("mca_base_component_show_load_errors"))
        if show_load_errors_matches(setting, self.name, candidate.name):
            self.log.error("component failed and was skipped", failure=str(failure))
        else:
            self.log.debug("component failed and was skipped", failure=str(failure))


def _fatal(error: BaseException) -> BaseException | None:
    """``error`` if it must reach the caller after cleanup (not an ``Exception``)."""
    return None if isinstance(error, Exception) else error
