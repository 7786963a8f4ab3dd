"""One registered parameter: its definition (validated) and its current value."""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from typing import Any

import attrs

from ..._public import public
from ..._records import FrozenValue
from ._errors import ParamRegistrationError, ParamValueError
from ._paramfile import KEY
from ._values import (
    DEFAULT_ORIGIN,
    Enumeration,
    InfoLevel,
    InvalidValue,
    Origin,
    ParamType,
    Source,
    convert,
    describe_valid,
    resolve_type,
    value_to_string,
)

_FRAMEWORK = re.compile(r"[a-z][a-z0-9]*")
_COMPONENT = re.compile(r"[a-z][a-z0-9_]*")
_NAME = re.compile(r"[A-Za-z0-9_]+")
_GROUP = re.compile(r"[a-z][a-z0-9]*(_[a-z][a-z0-9_]*)?")


@public
@attrs.frozen(eq=False, repr=False)
class Synonym(FrozenValue):
    """Another name of a parameter; a value given under a deprecated one warns."""

    name: str
    deprecated: bool


@attrs.frozen(eq=False, repr=False)
class Definition(FrozenValue):
    """Everything ``register`` was told; compared to detect conflicting re-registration."""

    framework: str
    component: str | None
    name: str | None
    type: ParamType
    enumeration: Enumeration | None
    default: Any
    help: str
    level: InfoLevel
    settable: bool
    internal: bool
    synonyms: tuple[Synonym, ...]
    group: str
    #: Sources a value may come from besides the default (core parameters
    #: that choose the files cannot themselves come from a file).
    sources: frozenset[Source]
    #: Checks a converted value beyond its type (a grammar, a set of words);
    #: raises :class:`InvalidValue` with the reason.
    check: Callable[[Any], None] | None = None
    #: What ``check`` accepts, shown as the valid values.
    valid: str | None = None
    #: Read-only information (Open MPI's ``DEFAULT_ONLY``): only the default counts.
    informational: bool = False


@public
class Param:
    """A registered parameter [Open MPI: MCA variable].

    Instances are created by :meth:`ParamSpace.register` and stay valid across
    deregistration: re-registering the same name re-uses the object and
    re-resolves its value, so a component holding it sees the new value.
    Only the owning :class:`ParamSpace` changes the value (under its lock).
    """

    __slots__ = (
        "_definition",
        "_framework_lock",
        "_full_name",
        "_origin",
        "_override_lock",
        "_registered",
        "_value",
    )

    def __init__(self, full_name: str, definition: Definition) -> None:
        self._full_name = full_name
        self._definition = definition
        self._value: Any = definition.default
        self._origin: Origin = DEFAULT_ORIGIN
        # Why set() refuses, if it does: the override file, or a locked framework.
        self._override_lock: str | None = None
        self._framework_lock: str | None = None
        self._registered = True

    # Called by the owning ParamSpace only, under its lock.
    def _assign(self, value: Any, origin: Origin) -> None:
        self._value = value
        self._origin = origin

    def _redefine(self, definition: Definition) -> None:
        self._definition = definition

    # -- definition -------------------------------------------------------

    @property
    def full_name(self) -> str:
        """``<framework>_<component>_<name>`` (parts that are ``None`` are left out)."""
        return self._full_name

    @property
    def framework(self) -> str:
        return self._definition.framework

    @property
    def component(self) -> str | None:
        """The component, ``"base"`` for framework-level parameters, ``None`` if left out."""
        return self._definition.component

    @property
    def name(self) -> str | None:
        """The parameter's own name; ``None`` for a framework selection parameter."""
        return self._definition.name

    @property
    def type(self) -> ParamType:
        return self._definition.type

    @property
    def enumeration(self) -> Enumeration | None:
        return self._definition.enumeration

    @property
    def default(self) -> Any:
        return self._definition.default

    @property
    def help(self) -> str:
        return self._definition.help

    @property
    def level(self) -> InfoLevel:
        return self._definition.level

    @property
    def internal(self) -> bool:
        return self._definition.internal

    @property
    def informational(self) -> bool:
        """Read-only information: its value is always the default (``ompi_info``'s
        "informational" variables)."""
        return self._definition.informational

    @property
    def synonyms(self) -> tuple[Synonym, ...]:
        return self._definition.synonyms

    @property
    def group(self) -> str:
        """The deregistration group, ``<framework>`` or ``<framework>_<component>``."""
        return self._definition.group

    @property
    def definition(self) -> Definition:
        return self._definition

    # -- state --------------------------------------------------------------

    @property
    def value(self) -> Any:
        """The typed current value (``bool``, ``int``, ``float``, ``str``, ``tuple[str, ...]``)."""
        return self._value

    @property
    def origin(self) -> Origin:
        """Where :attr:`value` came from."""
        return self._origin

    @property
    def settable(self) -> bool:
        """Whether :meth:`ParamSpace.set` may change the value now."""
        return self.read_only_reason is None

    @property
    def declared_settable(self) -> bool:
        """Whether the parameter was registered as settable (before any lock)."""
        return self._definition.settable

    @property
    def read_only_reason(self) -> str | None:
        """Why :meth:`ParamSpace.set` would refuse, or ``None`` if it would not."""
        if self._override_lock is not None:
            return self._override_lock
        if self._definition.informational:
            return "the parameter is informational (read-only): its value is always the default"
        if not self._definition.settable:
            return "the parameter is read-only (not registered as settable)"
        return self._framework_lock

    @property
    def registered(self) -> bool:
        """``False`` once deregistered (until registered again)."""
        return self._registered

    def value_string(self) -> str:
        """The value printed like Open MPI: ``true``/``false``, enum names, comma-joined lists."""
        return value_to_string(self.type, self.enumeration, self._value)

    def valid_values(self) -> str:
        """A description of the values this parameter accepts."""
        if self._definition.valid is not None:
            return self._definition.valid
        return describe_valid(self.type, self.enumeration)

    def __repr__(self) -> str:
        return f"<Param {self._full_name}={self.value_string()!r} ({self._origin})>"


def full_name_of(framework: str, component: str | None, name: str | None) -> str:
    """Validate the parts and join those that are not ``None`` with ``_``."""
    if not isinstance(framework, str) or not _FRAMEWORK.fullmatch(framework):
        raise ParamRegistrationError(
            f"invalid framework name {framework!r}: must match [a-z][a-z0-9]*"
        )
    if component is not None and not _COMPONENT.fullmatch(component):
        raise ParamRegistrationError(
            f"invalid component name {component!r}: must match [a-z][a-z0-9_]*"
        )
    if name is not None and not _NAME.fullmatch(name):
        raise ParamRegistrationError(f"invalid parameter name {name!r}: must match [A-Za-z0-9_]+")
    return "_".join(part for part in (framework, component, name) if part is not None)


def make_definition(
    full_name: str,
    framework: str,
    component: str | None,
    name: str | None,
    *,
    type_spec: object,
    default: object,
    help: str,
    level: int,
    enumeration: Enumeration | None,
    settable: bool,
    internal: bool,
    synonyms: Sequence[str],
    deprecated_synonyms: Sequence[str],
    group: str | None,
    sources: frozenset[Source],
    check: Callable[[Any], None] | None = None,
    valid: str | None = None,
    informational: bool = False,
) -> Definition:
    """Validate and normalize what ``register`` was given (the default is parsed)."""
    where = f"MCA parameter {full_name!r}"
    try:
        ptype, implied = resolve_type(type_spec)
        info_level = InfoLevel(int(level))
    except (TypeError, ValueError) as exc:
        raise ParamRegistrationError(f"{where}: {exc}") from None
    if implied is not None and enumeration is not None and implied != enumeration:
        raise ParamRegistrationError(f"{where}: two different enumerations given")
    enumeration = enumeration or implied
    if enumeration is not None and ptype is not ParamType.INT:
        raise ParamRegistrationError(
            f"{where}: enumerations apply to int parameters, not {ptype.type_name}"
        )
    if default is None and ptype is ParamType.STRING and enumeration is None:
        typed_default: Any = None  # an unset string, printed as ""
    else:
        try:
            typed_default = convert(ptype, enumeration, default)
            if check is not None:
                check(typed_default)
        except InvalidValue as exc:
            raise ParamValueError(
                full_name,
                default,
                DEFAULT_ORIGIN,
                valid or describe_valid(ptype, enumeration),
                str(exc),
            ) from None
    all_synonyms = tuple(Synonym(s, False) for s in synonyms) + tuple(
        Synonym(s, True) for s in deprecated_synonyms
    )
    seen = {full_name}
    for synonym in all_synonyms:
        if not KEY.fullmatch(synonym.name) or synonym.name in seen:
            raise ParamRegistrationError(f"{where}: invalid or duplicate synonym {synonym.name!r}")
        seen.add(synonym.name)
    if group is None:
        group = framework if component is None else f"{framework}_{component}"
    elif not _GROUP.fullmatch(group):
        raise ParamRegistrationError(f"{where}: invalid group {group!r}")
    return Definition(
        framework=framework,
        component=component,
        name=name,
        type=ptype,
        enumeration=enumeration,
        default=typed_default,
        help=str(help),
        level=info_level,
        settable=bool(settable),
        internal=bool(internal),
        synonyms=all_synonyms,
        group=group,
        sources=sources,
        check=check,
        valid=valid,
        informational=bool(informational),
    )


def describe_conflict(full_name: str, old: Definition, new: Definition) -> str:
    if old.type is not new.type or old.enumeration != new.enumeration:
        old_type = old.enumeration.name if old.enumeration else old.type.type_name
        new_type = new.enumeration.name if new.enumeration else new.type.type_name
        return (
            f"MCA parameter {full_name!r} is already registered with type {old_type}; "
            f"cannot register it again with type {new_type}"
        )
    diffs = [
        f"{field.name} {getattr(old, field.name)!r} != {getattr(new, field.name)!r}"
        for field in attrs.fields(Definition)
        if getattr(old, field.name) != getattr(new, field.name)
    ]
    return (
        f"MCA parameter {full_name!r} is already registered with a different definition "
        f"({'; '.join(diffs)}); deregister it first"
    )
