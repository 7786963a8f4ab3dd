"""A session of some frameworks validates every parameter name it was given."""

from __future__ import annotations

from ..mca._open import OpenFramework
from ._runtime import RUNTIME, Runtime
from ._unknown import CORE


def check_given_names(runtime: Runtime = RUNTIME) -> None:
    """Validate every name a session was given, also those of frameworks it did not open.

    A session of some frameworks registers only their parameters, so a value
    given for another framework's parameter (``mpi_leave_pinned``, registered
    by the memory base) or a misspelt name would pass unseen where a default
    session rejects it. When given names remain unregistered, the installed
    frameworks that may own them are registered as ``pmca info`` does (their
    components' ``register`` only, nothing opened) and unloaded again: a bad
    value raises :class:`pmca.ParamValueError`, an unknown name warns. A
    session whose given names are all registered pays nothing.
    """
    with runtime.lock:
        catalog = runtime.catalog
        unopened = [name for name in catalog.frameworks if name not in runtime.frameworks]
        owners = {
            name.partition("_")[0]
            for name in runtime.params.unknown_origins()
            if name.partition("_")[0] != CORE  # the core's names are always registered
        }
        if not (owners and unopened):
            runtime.warn_unknown_names()
            return
        # A name outside every framework's namespace (mpi_*, a typo) may be any one's.
        wanted = (
            unopened
            if owners - set(catalog.frameworks)
            else [name for name in unopened if name in owners]
        )
        states: list[OpenFramework] = []
        try:
            for name in wanted:
                state = OpenFramework(catalog.get(name), runtime)
                states.append(state)
                state.register_all()
            runtime.warn_unknown_names(also=states)
        finally:
            for state in reversed(states):
                state.unload_all()
