"""Open MPI's parameter dump formats (``mca_base_var_dump``), as used by ``pmca info``."""

from __future__ import annotations

from ..._public import public
from ._param import Param, Synonym
from ._values import BOOL_ENUM, Enumeration, ParamType


def _view(param: Param, name: str | None) -> tuple[str, Synonym | None]:
    """The name to print and, when printing a synonym's own entry, that synonym."""
    if name is None or name == param.full_name:
        return param.full_name, None
    for synonym in param.synonyms:
        if synonym.name == name:
            return name, synonym
    raise ValueError(f"{name!r} is not a name of MCA parameter {param.full_name!r}")


def _enumerators(param: Param) -> Enumeration | None:
    if param.enumeration is not None:
        return param.enumeration
    return BOOL_ENUM if param.type is ParamType.BOOL else None


@public
def format_readable(param: Param, *, name: str | None = None) -> list[str]:
    """Open MPI's READABLE dump: the ``parameter "..." (...)`` line, the help, valid values.

    ``name`` may be one of the parameter's synonyms, to print that synonym's
    own entry (``synonym of: ...``), as ``ompi_info`` does.
    """
    shown, synonym = _view(param, name)
    extras = []
    if synonym is not None:
        if synonym.deprecated:
            extras.append("deprecated")
        extras.append(f"synonym of: {param.full_name}")
    elif param.synonyms:
        extras.append("synonyms: " + ", ".join(s.name for s in param.synonyms))
    level = param.level
    kind = "informational" if param.informational else "parameter"
    head = (
        f'{kind} "{shown}" (current value: "{param.value_string()}", '
        f"data source: {param.origin}, level: {int(level)} {level.label}, "
        f"type: {param.type.type_name}" + "".join(f", {extra}" for extra in extras) + ")"
    )
    lines = [head]
    if param.help:
        lines.extend(param.help.splitlines())
    enumeration = _enumerators(param)
    if enumeration is not None:
        # Open MPI's form, which scrapers of ompi_info output parse.
        lines.append(f"Valid values: {enumeration.listing()}")
    elif param.definition.valid is not None:
        # What a ``check`` accepts, in the same form.
        lines.append(f"Valid values: {param.definition.valid}")
    return lines


def _quote(value: str) -> str:
    # Parsable output is split on ':'; Open MPI quotes values that contain one.
    return f'"{value}"' if ":" in value else value


@public
def format_parsable(param: Param, *, name: str | None = None) -> list[str]:
    """Open MPI's PARSABLE dump, ``mca:<fw>:<comp>:param:<name>:<field>:<value>`` lines.

    Fields, in Open MPI 5's order: ``value``, ``source``, ``status``, ``level``,
    ``help`` (when there is one), ``enumerator:value:<n>:<name>`` (bools and
    enumerations) or ``valid_values`` (what a ``check`` accepts, the ``valid=``
    text of :meth:`ParamSpace.register`; pmca's own field), ``deprecated``,
    ``type``, ``synonym_of:name:`` or ``synonym:name:``, ``disabled:false``.
    ``name`` selects a synonym's entry.
    """
    shown, synonym = _view(param, name)
    framework, component = param.framework, param.component or "base"
    if synonym is not None and not synonym.name.startswith(f"{framework}_"):
        # A synonym from another framework is listed under it (opal_* for mpi_*).
        framework, component = synonym.name.split("_", 1)[0], "base"
    prefix = f"mca:{framework}:{component}:param:{shown}:"
    lines = [
        f"{prefix}value:{_quote(param.value_string())}",
        f"{prefix}source:{param.origin}",
        f"{prefix}status:{'writeable' if param.settable else 'read-only'}",
        f"{prefix}level:{int(param.level)}",
    ]
    if param.help:
        lines.append(f"{prefix}help:{' '.join(param.help.splitlines())}")
    enumeration = _enumerators(param)
    if enumeration is not None:
        lines.extend(
            f"{prefix}enumerator:value:{value}:{label}" for label, value in enumeration.values
        )
    elif param.definition.valid is not None:
        # Open MPI has no field for a validator's text; this one follows its
        # conventions: one field name, then the value, quoted if it has a ':'.
        lines.append(f"{prefix}valid_values:{_quote(param.definition.valid)}")
    deprecated = synonym is not None and synonym.deprecated
    lines.append(f"{prefix}deprecated:{'yes' if deprecated else 'no'}")
    lines.append(f"{prefix}type:{param.type.type_name}")
    if synonym is not None:
        lines.append(f"{prefix}synonym_of:name:{param.full_name}")
    else:
        lines.extend(f"{prefix}synonym:name:{s.name}" for s in param.synonyms)
    lines.append(f"{prefix}disabled:false")
    return lines
