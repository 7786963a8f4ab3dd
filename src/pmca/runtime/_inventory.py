"""What is installed, with every parameter registered: the data behind ``pmca info``."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from contextlib import contextmanager

from attrs import frozen

from .._public import public
from .._records import FrozenValue
from ..mca._errors import SessionError
from ..mca._framework import Framework
from ..mca._open import LoadedComponent, OpenFramework
from ..mca.params import Param
from ._runtime import RUNTIME, Runtime

TYPE_CHECKING = False  # typing.TYPE_CHECKING, without importing typing for it
if TYPE_CHECKING:  # annotations only: the failure records are built at the first failure
    from ..mca._failures import ComponentFailure


@public
@frozen(eq=False, repr=False)
class ComponentEntry(FrozenValue):
    """One component as ``pmca info`` shows it."""

    framework: str
    name: str
    version: str
    api_version: str
    load_mode: str
    location: str
    distribution: str | None
    admitted: bool
    params: tuple[Param, ...]


@public
@frozen(eq=False, repr=False)
class FrameworkEntry(FrozenValue):
    """One framework as ``pmca info`` shows it."""

    framework: Framework
    location: str
    params: tuple[Param, ...]
    components: tuple[ComponentEntry, ...]
    failures: tuple[ComponentFailure, ...]


def _entry(state: OpenFramework, loaded: LoadedComponent, admitted: bool) -> ComponentEntry:
    space = state.host.params
    return ComponentEntry(
        state.name,
        loaded.component.name,
        loaded.component.version,
        loaded.component.api_version,
        loaded.load_mode,
        loaded.candidate.location,
        loaded.candidate.distribution,
        admitted,
        tuple(space.params(state.name, loaded.candidate.name)),
    )


@public
@contextmanager
def inventory(
    names: Sequence[str] | None = None, *, runtime: Runtime = RUNTIME, isolate: bool = False
) -> Iterator[list[FrameworkEntry]]:
    """Register every component of ``names`` (all frameworks by default), open none.

    ``isolate``: import each third-party component in a child process first
    (see :meth:`pmca.mca.OpenFramework.register_all`).

    Needs a live session for the parameter space, and frameworks that are not
    open: an inventory loads components outside their normal lifecycle.
    """
    with runtime.lock:
        catalog = runtime.catalog
        wanted = list(catalog.frameworks) if names is None else list(names)
        busy = [name for name in wanted if name in runtime.frameworks]
        if busy:
            raise SessionError(f"cannot take an inventory of open frameworks: {', '.join(busy)}")
        states: list[OpenFramework] = []
        entries: list[FrameworkEntry] = []
        try:
            for name in wanted:
                state = OpenFramework(catalog.get(name), runtime)
                states.append(state)
                space = runtime.params
                known = {p.full_name for p in space.params()}
                admitted = state.register_all(isolate=isolate)
                components = {lc.candidate.name for lc in state.loaded}
                # Framework-level: its own group plus what its base registered
                # elsewhere (the memory base registers mpi_leave_pinned).
                framework_params = [
                    p
                    for p in space.params()
                    if p.full_name not in known
                    and not (p.framework == name and p.component in components)
                ]
                entries.append(
                    FrameworkEntry(
                        state.framework,
                        catalog.locations[name],
                        tuple(framework_params),
                        tuple(
                            _entry(state, lc, admitted[lc.candidate.name]) for lc in state.loaded
                        ),
                        tuple(state.failures),
                    )
                )
            yield entries
        finally:
            for state in reversed(states):
                state.unload_all()
