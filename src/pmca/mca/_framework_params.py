"""A framework's own parameters, and the components its selection parameter admits.

Before any component is imported, an open registers the framework's selection
parameter (``<framework>``, Open MPI's include/exclude list) and its
``<framework>_base_verbose``, then reads the selection, resolves deprecated
aliases and finds the components, checking that every name it gives exists.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ._discovery import Candidate, Discovered, EntryPointIndex, discover_components
from ._errors import ComponentWarning, warn_user
from ._framework import Framework
from ._logging import framework_logger
from ._selection import (
    Selection,
    check_excluded_exist,
    check_included_exist,
    parse_selection,
    resolve_aliases,
)

if TYPE_CHECKING:
    from structlog.typing import FilteringBoundLogger

    from .params import ParamSpace


def register_framework_params(space: ParamSpace, name: str) -> None:
    """Register framework ``name``'s selection parameter and its ``_base_verbose``."""
    from .params import VERBOSITY

    space.register(
        name,
        None,
        None,
        type=str,
        default="",
        help=f"Default selection set of components for the {name} framework "
        f"(<none> means use all components that can be found)",
        level=2,
        settable=True,
    )
    space.register(
        name,
        "base",
        "verbose",
        type=int,
        enumeration=VERBOSITY,
        default=0,
        help=f"Verbosity level for the {name} framework (default: 0)",
        level=8,
        settable=True,
    )


def framework_log(space: ParamSpace, name: str) -> FilteringBoundLogger:
    """The framework's logger, following ``<framework>_base_verbose`` live."""
    verbose = space.get(f"{name}_base_verbose")
    return framework_logger(name, lambda: int(verbose.value), str(space.value("mca_base_verbose")))


def admitted_components(
    framework: Framework,
    space: ParamSpace,
    component_path: list[str],
    entry_points: EntryPointIndex,
    log: FilteringBoundLogger,
) -> tuple[Selection, Discovered]:
    """The framework's selection (aliases resolved) and the components found.

    Raises for a selection naming a component that does not exist.
    """
    name = framework.name
    param = space.get(name)
    source = str(param.origin)
    selection = parse_selection(str(param.value), parameter=name, source=source)
    selection, deprecated = resolve_aliases(selection, framework.aliases)
    for alias, target in deprecated:
        log.warning("deprecated component alias", alias=alias, use=target)
    discovered = discover_components(framework, component_path, entry_points)
    for shadowed in discovered.shadowed:
        _warn_shadowed(discovered.candidates[shadowed.name], shadowed)
    check_included_exist(
        selection, discovered.candidates, framework.aliases, framework=name, source=source
    )
    check_excluded_exist(
        selection, discovered.candidates, framework.aliases, framework=name, source=source
    )
    return selection, discovered


def _warn_shadowed(used: Candidate, ignored: Candidate) -> None:
    """Two places offer one component name: say which one is used.

    Python's default warning filter shows it once per calling line.
    """
    warn_user(
        ComponentWarning(
            f"component {used.framework}/{used.name} is offered twice: using {used.location}; "
            f"ignoring {ignored.location} (precedence: built-in, then entry points in "
            f"sys.path order, then drop-ins in mca_base_component_path order)"
        )
    )


__all__ = ["admitted_components", "framework_log", "register_framework_params"]
