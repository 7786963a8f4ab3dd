"""The ``mca_base_*`` parameters of the component architecture itself."""

from __future__ import annotations

from ..mca.params import Enumeration, ParamSpace

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
    )
    space.register(
        "mca",
        "base",
        "verbose",
        type=str,
        default="stderr",
        help="Where verbose output goes: 'stderr', 'stdout', or 'logging' (the standard "
        "library logger pmca.<framework>)",
        level=9,
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
        "before failing with an error naming the peers that never answered",
        level=4,
    )
