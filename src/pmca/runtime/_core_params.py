"""The ``mca_base_*`` parameters of the component architecture itself.

Their grammar is checked where the value is read (a wrong value is a
:class:`~pmca.mca.params.ParamValueError` naming the value and its source);
the framework and component names they mention are checked against what is
installed by :func:`check_installed_names` once the frameworks are known.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping
from typing import Any

from ..mca._discovery import EntryPointIndex, discover_components
from ..mca._errors import warn_user
from ..mca._framework import Framework
from ..mca._load_errors import (
    SHOW_LOAD_ERRORS_VALID,
    show_load_errors_items,
    show_load_errors_problem,
)
from ..mca._loader import LOAD_LIST_VALID, LoadModeSpec, load_list_problem
from ..mca._logging import DESTINATION_VALID, Destination
from ..mca._names import close_matches
from ..mca.params import (
    MAX_TIMEOUT,
    Enumeration,
    InvalidValue,
    Param,
    ParamSpace,
    ParamValueError,
    ParamWarning,
    a_path,
    one_of,
    within,
)

LOAD_LISTS = ("mca_base_component_dso", "mca_base_component_static")
SHOW_LOAD_ERRORS = "mca_base_component_show_load_errors"


def _check_load_list(value: Any) -> None:
    problem = load_list_problem(str(value))
    if problem is not None:
        raise InvalidValue(problem)


def _check_show_load_errors(value: Any) -> None:
    problem = show_load_errors_problem(str(value))
    if problem is not None:
        raise InvalidValue(problem)


def _check_destination(value: Any) -> None:
    try:
        Destination.parse(str(value))
    except ValueError as exc:
        raise InvalidValue(str(exc)) from None


#: ``mca_base_component_stale_check``: what a stale reference to a closed
#: component does at the last finalize.
STALE_CHECK = Enumeration("stale_check", (("none", 0), ("warn", 1), ("error", 2)))


def register_core_params(space: ParamSpace) -> None:
    space.register(
        "mca",
        "base",
        "component_path",
        type=str,
        default="",
        help="':'-separated directories holding drop-in components "
        "(files or packages named pmca_<framework>_<component>)",
        level=9,
        deprecated_synonyms=("mca_component_path",),
        **a_path(":"),
    )
    space.register(
        "mca",
        "base",
        "component_dso",
        type=str,
        default="none",
        help="Components loaded dynamically: imported afresh at framework open and "
        "unloaded at the last close ('all', 'none', or a list of fw and fw-comp)",
        level=9,
        check=_check_load_list,
        valid=LOAD_LIST_VALID,
    )
    space.register(
        "mca",
        "base",
        "component_static",
        type=str,
        default="none",
        help="Components loaded statically, resident for the whole process ('all', 'none', "
        "or a list of fw and fw-comp; beats mca_base_component_dso at the same level)",
        level=9,
        check=_check_load_list,
        valid=LOAD_LIST_VALID,
    )
    space.register(
        "mca",
        "base",
        "component_default_load_mode",
        type=str,
        default="static",
        help="The load mode of a component neither mca_base_component_dso nor "
        "mca_base_component_static names (static, as in Open MPI 5)",
        level=9,
        informational=True,
    )
    space.register(
        "mca",
        "base",
        "component_show_load_errors",
        type=str,
        default="all",
        help="Whether to show errors for components that fail to load: 'all', 'none', "
        "or a comma-delimited list of fw and fw/comp items, negated by a leading '^'",
        level=9,
        deprecated_synonyms=("mca_component_show_load_errors",),
        check=_check_show_load_errors,
        valid=SHOW_LOAD_ERRORS_VALID,
    )
    space.register(
        "mca",
        "base",
        "verbose",
        type=str,
        default="stderr",
        help="Where verbose output goes: 'stderr', 'stdout', 'syslog' (with "
        "'syslogpri:<notice|info|debug>' and 'syslogid:<str>'), or 'logging' (the "
        "standard library logger pmca.<framework>)",
        level=9,
        deprecated_synonyms=("mca_verbose",),
        check=_check_destination,
        valid=DESTINATION_VALID,
    )
    space.register(
        "mca",
        "base",
        "component_stale_check",
        type=int,
        enumeration=STALE_CHECK,
        default="error",
        help="What a module-level global of pmca or of any component's package that still "
        "refers to a closed component does: 'error' (StaleReferenceError at the last "
        "finalize), 'warn' (an error message, and carry on), or 'none' (not checked)",
        level=9,
    )
    space.register(
        "mca",
        "base",
        "component_quarantine",
        type=bool,
        default=True,
        help="Reserve the address range of every native library a dso-mode component "
        "unloads, inaccessible, so that a stale pointer into it faults where it is used "
        "instead of reaching a library later mapped at the same address",
        level=9,
    )
    space.register(
        "pmca",
        "base",
        "modex_timeout",
        type=float,
        default=60.0,
        help="Seconds a session init waits for every peer's modex entry (btl addresses) "
        "before failing with an error naming the peers that never answered (more than "
        "0, at most a week)",
        level=4,
        **within(0, MAX_TIMEOUT, "s", above=True),
    )
    space.register(
        "pmca",
        "base",
        "finalize_timeout",
        type=float,
        default=5.0,
        help="Seconds a session finalize keeps moving this rank's own messages before it "
        "gives up on those not delivered (a warning names peer, tag, count and bytes; "
        "their requests fail); a finalize after an error also waits at most this long "
        "for its peers to acknowledge that it left (0 to a week)",
        level=4,
        **within(0, MAX_TIMEOUT, "s"),
    )
    space.register(
        "pmca",
        "base",
        "world",
        type=str,
        default="single",
        help="The world of a session given none: 'single' (this process alone), "
        "'launcher' (PMIx if the environment offers it, else PMI, else single), "
        "'pmix' or 'pmi'; a program run under mpirun/mpiexec then needs no code change",
        level=3,
        **one_of("single", "launcher", "pmix", "pmi"),
    )
    space.register(
        "pmca",
        "base",
        "pmi_version",
        type=str,
        default="auto",
        help="The PMI version a PMI world speaks: 'auto' (PMI-2 where the launcher "
        "offers it, else PMI-1), '1' or '2' (an error if the launcher does not offer it)",
        level=6,
        **one_of("auto", "1", "2"),
    )
    space.register(
        "pmca",
        "base",
        "live_view",
        type=str,
        default="auto",
        help="Let other processes of the same user read this process's performance "
        "variables (pmca stats PID) through a Unix socket in $XDG_RUNTIME_DIR/pmca, or "
        "/tmp/pmca-UID (mode 0700) without it: 'auto' (only under a launcher: mpirun, "
        "mpiexec, srun), 'on' or 'off'",
        level=3,
        **one_of("auto", "on", "off"),
    )
    space.register(
        "pmca",
        "base",
        "world_verbose",
        type=int,
        default=0,
        help="Verbosity (0-100) of building a session's world: at 1 or more it says "
        "which world the launcher offered and why",
        level=8,
    )


def check_installed_names(
    space: ParamSpace,
    frameworks: Mapping[str, Framework],
    other_names: Iterable[str],
    index: EntryPointIndex,
) -> None:
    """Refuse load-mode and show-load-errors lists naming what is not installed.

    ``other_names`` are frameworks that exist but could not be used (failed
    to load, or disabled by a broken declaration): naming them is no mistake.
    Raises :class:`ParamValueError` naming the parameter, the value, its
    source and what is installed.
    """
    known = set(frameworks) | set(other_names)
    path = [p for p in str(space.value("mca_base_component_path") or "").split(":") if p]
    components: dict[str, set[str]] = {}

    def components_of(name: str) -> set[str]:
        if name not in components:
            framework = frameworks.get(name)
            found: set[str] = set()
            if framework is not None:
                found = set(discover_components(framework, path, index).candidates)
                found.update(framework.aliases)
            components[name] = found
        return components[name]

    def check(param: Param, pairs: Iterable[tuple[str, str | None]], separator: str) -> None:
        for framework, component in pairs:
            if framework not in known:
                _refuse(
                    param,
                    f"no installed framework is called {framework!r}",
                    framework,
                    sorted(known),
                    "installed frameworks",
                )
            elif component is not None and framework in frameworks:
                available = components_of(framework)
                if component not in available:
                    _refuse(
                        param,
                        f"framework {framework!r} has no component {component!r}",
                        component,
                        sorted(available),
                        f"{framework} components",
                        prefix=f"{framework}{separator}",
                    )

    for name in LOAD_LISTS:
        param = space.get(name)
        spec = LoadModeSpec.parse(param.value, parameter=name)
        fws, comps = spec.names()
        check(param, [*((fw, None) for fw in sorted(fws)), *sorted(comps)], "-")
    param = space.get(SHOW_LOAD_ERRORS)
    parsed = show_load_errors_items(str(param.value))
    if parsed is not None:
        pairs: list[tuple[str, str | None]] = []
        for item in parsed[1]:
            framework, slash, component = item.partition("/")
            pairs.append((framework, component if slash else None))
        check(param, pairs, "/")


def _refuse(
    param: Param,
    problem: str,
    wrong: str,
    known: list[str],
    what: str,
    *,
    prefix: str = "",
) -> None:
    close = close_matches(wrong, known, n=1)
    hint = f"; did you mean {prefix + close[0]!r}?" if close else ""
    raise ParamValueError(
        param.full_name,
        param.value,
        param.origin,
        param.valid_values(),
        f"{problem}{hint} ({what}: {', '.join(known) or '(none)'})",
    )


def warn_missing_directories(space: ParamSpace) -> None:
    """A ``mca_base_component_path`` directory that does not exist is most likely a typo."""
    param = space.get("mca_base_component_path")
    for directory in (p for p in str(param.value or "").split(":") if p):
        if not os.path.isdir(os.path.expanduser(directory)):
            warn_user(
                ParamWarning(
                    f"MCA parameter {param.full_name!r} (from {param.origin}) names "
                    f"{directory!r}, which is not a directory; no drop-in components "
                    f"are found there"
                )
            )
