"""``pmca info --json``: the inventory as one JSON document.

Schema ``pmca-info`` version 1 (additions keep the version; a removal or a
change of meaning bumps it), documented field by field in docs/reference/cli.md,
section "``pmca info --json``": keep the two in step.
"""

from __future__ import annotations

import json
import math
import platform
import sys
from typing import Any

from .._version import __version__
from ..mca._failures import ComponentFailure
from ..mca.params import BOOL_ENUM, Param, ParamSpace, ParamType
from ._model import BASE, Report, load_mode_counts, load_mode_summary
from ._text import MCA_VERSION, View, selection_of

SCHEMA = "pmca-info"
SCHEMA_VERSION = 1


def _typed(value: object) -> Any:
    if isinstance(value, float) and not math.isfinite(value):
        return str(value)  # JSON has no inf/nan
    if isinstance(value, (tuple, list)):
        return [_typed(item) for item in value]
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    return str(value)


def param_json(param: Param) -> dict[str, Any]:
    enumeration = param.enumeration
    if enumeration is None and param.type is ParamType.BOOL:
        enumeration = BOOL_ENUM
    return {
        "name": param.full_name,
        "framework": param.framework,
        "component": param.component or BASE,
        "value": param.value_string(),
        "typed_value": _typed(param.value),
        "source": param.origin.source.label,
        "source_detail": param.origin.detail,
        "data_source": str(param.origin),
        "level": int(param.level),
        "level_name": param.level.label,
        "type": param.type.type_name,
        "help": param.help,
        "settable": param.settable,
        "internal": param.internal,
        "informational": param.informational,
        # A registered name is never deprecated itself; its synonyms may be.
        "deprecated": False,
        "enumerators": (
            None
            if enumeration is None
            else [{"value": value, "name": name} for name, value in enumeration.values]
        ),
        "valid_values": param.valid_values(),
        "synonyms": [{"name": s.name, "deprecated": s.deprecated} for s in param.synonyms],
    }


def failure_json(failure: ComponentFailure) -> dict[str, Any]:
    return {
        "framework": failure.framework,
        "component": failure.component,
        "hook": failure.hook,
        "location": failure.location,
        "distribution": failure.distribution,
        "error_type": failure.error_type,
        "message": failure.message,
        "reason": failure.reason,
        "traceback": failure.traceback,
    }


def document(report: Report, view: View, space: ParamSpace) -> dict[str, Any]:
    """The JSON document for ``report`` as ``view`` selects it."""
    groups = report.param_groups(view.selectors, view.shown, selected_only=view.selected_only)
    visible = {param for _, group in groups for param in group.params}
    in_frameworks = {section.name for section, _ in groups if section.entry is not None}
    listings = {
        listing.entry.framework.name: listing
        for listing in report.listings(view.selectors, selected_only=view.selected_only)
    }
    core = [p for section, g in groups if section.entry is None for p in g.params]
    frameworks = []
    for entry in report.entries:
        framework = entry.framework
        listing = listings.get(framework.name)
        if listing is None and framework.name not in in_frameworks:
            continue
        selection = selection_of(entry)
        frameworks.append(
            {
                "name": framework.name,
                "description": framework.description,
                "api_version": str(framework.api_version),
                "policy": framework.policy,
                "depends": list(framework.depends),
                "allow_dso": framework.allow_dso,
                "location": entry.location,
                "selection": None if selection is None else selection.value_string(),
                "params": [param_json(p) for p in entry.params if p in visible],
                "components": [
                    {
                        "name": c.name,
                        "version": c.version,
                        "api_version": c.api_version,
                        "load_mode": c.load_mode,
                        "location": c.location,
                        "distribution": c.distribution,
                        "admitted": c.admitted,
                        "params": [param_json(p) for p in c.params if p in visible],
                    }
                    for c in (listing.components if listing else ())
                ],
                "failures": [failure_json(f) for f in (listing.failures if listing else ())],
            }
        )
    dso = space.get("mca_base_component_dso").value_string()
    static = space.get("mca_base_component_static").value_string()
    counts = load_mode_counts(report.entries)
    return {
        "schema": SCHEMA,
        "schema_version": SCHEMA_VERSION,
        "pmca": {"version": __version__, "mca_version": MCA_VERSION},
        "python": {
            "version": platform.python_version(),
            "implementation": platform.python_implementation(),
        },
        "platform": {
            "platform": platform.platform(),
            "machine": platform.machine(),
            "system": sys.platform,
        },
        "prefix": sys.prefix,
        "load_mode": {
            "summary": load_mode_summary(dso, static, (m for m, n in counts.items() if n)),
            "components": counts,
            "dso": dso,
            "static": static,
        },
        "param_files": list(space.param_files),
        "override_file": space.override_file,
        "level": view.shown.level,
        "internal": view.shown.internal,
        "core_params": [param_json(p) for p in core],
        "frameworks": frameworks,
        "framework_failures": [
            {
                "name": f.name,
                "location": f.location,
                "reason": f.reason,
                "distribution": f.distribution,
                "clashes_with": f.clash,
            }
            for f in report.wanted_framework_failures(view.selectors)
        ],
        "unknown_params": [
            {"name": name, "data_source": str(origin)}
            for name, origin in sorted(space.unknown_origins().items())
        ],
    }


def dumps(report: Report, view: View, space: ParamSpace) -> str:
    return json.dumps(document(report, view, space), indent=2, allow_nan=False)
