"""What components and framework bases see of pmca while they are loaded."""

from __future__ import annotations

import os
from typing import TYPE_CHECKING, Any, Protocol

from .._interrupts import deferred_interrupts
from .._public import public
from ._errors import SessionError
from ._loader import (
    LoadMode,
    NativeLibrary,
    UnloadGuard,
    close_library,
    open_library,
    run_unload_guards,
)

if TYPE_CHECKING:
    import structlog

    from .params import Param, ParamSpace


class FrameworkHost(Protocol):
    """The runtime services a loaded component may use."""

    @property
    def params(self) -> ParamSpace: ...

    def open_framework(self, name: str) -> Any: ...

    def close_framework(self, name: str) -> None: ...


class _GroupParams:
    """Parameters of one ``<framework>_<component>_*`` group."""

    def __init__(self, space: ParamSpace, framework: str, component: str) -> None:
        self._space = space
        self.framework = framework
        self.component = component

    def full_name(self, name: str) -> str:
        return f"{self.framework}_{self.component}_{name}"

    def register(self, name: str, **options: Any) -> Param:
        """Register ``<framework>_<component>_<name>``.

        Takes the options of :meth:`pmca.mca.params.ParamSpace.register`.
        """
        return self._space.register(self.framework, self.component, name, **options)

    def param(self, name: str) -> Param:
        return self._space.get(self.full_name(name))

    def __getitem__(self, name: str) -> Any:
        return self._space.value(self.full_name(name))


@public
class ComponentParams(_GroupParams):
    """A component's parameter group, handed to its ``register`` hook."""


@public
class FrameworkParams(_GroupParams):
    """The ``<framework>_base_*`` group, handed to a framework base."""

    def __init__(self, space: ParamSpace, framework: str) -> None:
        super().__init__(space, framework, "base")


@public
class ComponentContext:
    """Handed to ``open``, ``query`` and ``close``; valid while the component is loaded.

    It records the frameworks and native libraries the component acquires,
    so that pmca can release whatever the component forgets, in reverse
    order, when it closes.
    """

    def __init__(
        self,
        host: FrameworkHost,
        framework: str,
        component: str,
        load_mode: LoadMode,
        log: structlog.typing.FilteringBoundLogger,
    ) -> None:
        self._host: FrameworkHost | None = host
        self.framework = framework
        self.component = component
        self.load_mode: LoadMode = load_mode
        self.log = log
        self.params = ComponentParams(host.params, framework, component)
        self._opened: list[str] = []
        self.libraries: list[NativeLibrary] = []
        self._resident_guards: list[UnloadGuard] = []

    @property
    def host(self) -> FrameworkHost:
        if self._host is None:
            raise SessionError(
                f"component {self.framework}/{self.component} used its context after it was closed"
            )
        return self._host

    def open_framework(self, name: str) -> Any:
        """Open (or take another reference on) framework ``name``."""
        with deferred_interrupts():  # the reference and its record go together
            handle = self.host.open_framework(name)
            self._opened.append(name)
        return handle

    def close_framework(self, name: str) -> None:
        """Drop a reference taken with :meth:`open_framework`."""
        if name not in self._opened:
            raise SessionError(
                f"component {self.framework}/{self.component} closes framework {name!r} "
                f"that it did not open"
            )
        with deferred_interrupts():
            self._opened.reverse()
            self._opened.remove(name)
            self._opened.reverse()
            self.host.close_framework(name)

    def load_library(
        self, path: str | os.PathLike[str], *, before_unload: UnloadGuard | None = None
    ) -> NativeLibrary:
        """``dlopen`` a native library owned by this component.

        ``path`` is a ``str`` or any path-like object (a :class:`pathlib.Path`).

        In ``dso`` mode it is ``dlclose``d when the component unloads, after
        ``before_unload`` (if given) has had a chance to undo anything the
        library still owns.
        """
        library = open_library(
            path, owner=f"{self.framework}/{self.component}", resident=self.load_mode == "static"
        )
        if before_unload is not None:
            # A resident library is never dlclosed, but what it owns must
            # still be undone when its component unloads.
            guards = self._resident_guards if library.resident else library.before_unload
            guards.append(before_unload)
        if library not in self.libraries:
            self.libraries.append(library)
        return library

    def release(self) -> tuple[list[str], list[BaseException]]:
        """Close what the component left open; invalidate the context.

        Returns notes from library unload guards and the errors met, so the
        caller can report them without stopping.
        """
        notes: list[str] = []
        errors: list[BaseException] = []
        host = self._host
        while host is not None and self._opened:
            name = self._opened.pop()
            try:
                host.close_framework(name)
            except BaseException as exc:  # the caller re-raises it once all is released
                errors.append(exc)
        guards, self._resident_guards = self._resident_guards, []
        guard_notes, guard_errors = run_unload_guards(guards)
        notes.extend(guard_notes)
        errors.extend(guard_errors)
        quarantine = host is None or bool(host.params.value("mca_base_component_quarantine"))
        for library in reversed(self.libraries):
            try:
                notes.extend(close_library(library, quarantine=quarantine))
            except BaseException as exc:
                errors.append(exc)
        self.libraries.clear()
        self._host = None
        return notes, errors
