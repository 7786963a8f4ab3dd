"""The parameter space: registration and value resolution [Open MPI: mca_base_var].

All raw inputs (environment, API values, parameter files, override file) are
read once, when the space is built, and kept *pending* by name: parameters
are registered later, component by component, and each registration resolves
its value from whatever was given for its name (or a synonym), exactly as
Open MPI's ``var_set_initial`` does at ``mca_base_var_register`` time.

Precedence, highest first: override file > API/command line > environment
(``PMCA_MCA_<name>``) > parameter files (leftmost file wins) > default; a
run-time :meth:`ParamSpace.set` beats everything but the override file.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable, Container, Mapping, Sequence
from typing import Any, TypeVar

from ..._forksafe import fresh_after_fork
from ..._public import public
from .._names import close_matches
from ._checks import a_path
from ._errors import (
    ParamPermissionError,
    ParamRegistrationError,
    ParamValueError,
    ParamWarning,
    UnknownParamError,
)
from ._inputs import (
    LOOKUP_ORDER,
    OVERRIDE_FILE,
    PARAM_FILES,
    Inputs,
    Raw,
    default_override_file,
    default_param_files,
)
from ._param import Param, Synonym, describe_conflict, full_name_of, make_definition
from ._values import (
    DEFAULT_ORIGIN,
    Enumeration,
    InfoLevel,
    InvalidValue,
    Origin,
    ParamType,
    Source,
    convert,
)
from ._warnings import warn_deprecated, warn_from_caller

#: Sources that resolution consults (every pending one).
_ALL_SOURCES = frozenset(LOOKUP_ORDER)
_CORE_SOURCES = frozenset({Source.API, Source.ENV})


@public
class ParamSpace:
    """The registry of parameters for one parameter-space lifetime.

    :param environ: the process environment (default :data:`os.environ`);
        copied at construction. Its ``HOME`` also expands ``~`` in file names.
    :param api: values given through the API or ``--mca k v`` (source
        ``command line``); typed Python values or strings.
    :param param_files: the parameter files to read, leftmost wins; ``None``
        takes them from ``mca_base_param_files`` (API, environment or default).
        Files named here or by the user must exist; missing default files are
        skipped.
    :param override_file: the override file; ``None`` takes it from
        ``mca_base_override_param_file``; ``""`` or ``"none"`` disables it.
    """

    def __init__(
        self,
        *,
        environ: Mapping[str, str] | None = None,
        api: Mapping[str, object] | None = None,
        param_files: Sequence[str | os.PathLike[str]] | None = None,
        override_file: str | os.PathLike[str] | None = None,
    ) -> None:
        # Re-entrant: resolution runs inside register/set, which hold the lock.
        self._lock = fresh_after_fork(threading.RLock())
        self._inputs = Inputs(
            os.environ if environ is None else environ, api or {}, param_files, override_file
        )
        self._environ = self._inputs.environ
        self._pending = self._inputs.pending
        self._params: dict[str, Param] = {}
        self._names: dict[str, Param] = {}
        # Indexes, so that closing one of many components costs its own parameters only.
        self._by_group: dict[str, dict[str, Param]] = {}
        self._by_owner: dict[tuple[str, str | None], dict[str, Param]] = {}
        self._retired: dict[str, Param] = {}
        self._register_core()
        self._inputs.read_files(self._params[OVERRIDE_FILE], self._params[PARAM_FILES])

    # -- construction ---------------------------------------------------------

    def _register_core(self) -> None:
        self._register(
            "mca",
            "base",
            "param_files",
            type=ParamType.STRING,
            default=default_param_files(),
            help=(
                "Comma-separated parameter files, leftmost wins; 'none' reads no file. "
                "Settable from the command line/API or the environment only."
            ),
            level=InfoLevel.USER_DETAIL,
            deprecated_synonyms=("mca_param_files",),
            sources=_CORE_SOURCES,
            **a_path(","),
        )
        self._register(
            "mca",
            "base",
            "override_param_file",
            type=ParamType.STRING,
            default=default_override_file(),
            help=(
                "Parameters set in this file override every other source and cannot be "
                "changed at run time; 'none' disables it. Settable from the command "
                "line/API or the environment only."
            ),
            level=InfoLevel.USER_DETAIL,
            sources=_CORE_SOURCES,
            **a_path(),
        )

    # -- registration -----------------------------------------------------------

    def register(
        self,
        framework: str,
        component: str | None,
        name: str | None,
        *,
        type: object,
        default: object,
        help: str = "",
        level: int = 1,
        enumeration: Enumeration | None = None,
        settable: bool = False,
        internal: bool = False,
        synonyms: Sequence[str] = (),
        deprecated_synonyms: Sequence[str] = (),
        group: str | None = None,
        check: Callable[[Any], None] | None = None,
        valid: str | None = None,
        informational: bool = False,
    ) -> Param:
        """Register ``<framework>_<component>_<name>`` and resolve its value from all sources.

        Parts given as ``None`` are left out of the full name: ``("btl", None,
        None)`` is the selection parameter ``btl``, ``("btl", "base",
        "verbose")`` is ``btl_base_verbose``, ``("mpi", None, "leave_pinned")``
        is ``mpi_leave_pinned``.

        :param type: ``bool``, ``int``, ``float``, ``str``, ``list``, ``"size"``,
            a :class:`ParamType`, or an :class:`Enumeration` (an ``int``
            parameter with that enumeration).
        :param default: a typed value or a string, parsed like any other value.
        :param group: the deregistration group (``<framework>`` or
            ``<framework>_<component>``); defaults to this parameter's own.
        :param check: called with each converted value (the default too);
            raises ``InvalidValue`` with the reason when the value is wrong
            beyond its type (a grammar, a set of words).
        :param valid: what ``check`` accepts, shown as the valid values.
        :param informational: read-only information (Open MPI's ``DEFAULT_ONLY``,
            shown as ``informational`` by ``pmca info``): the value is always
            the default, and a value given for it is ignored with a warning.
        :returns: the :class:`Param`; registering an identical definition again
            returns the same object.
        :raises ParamRegistrationError: a malformed definition, or one that
            conflicts with a registered parameter or synonym.
        :raises ParamValueError: the default or the given value is invalid.
        """
        return self._register(
            framework,
            component,
            name,
            type=type,
            default=default,
            help=help,
            level=level,
            enumeration=enumeration,
            settable=settable,
            internal=internal,
            synonyms=synonyms,
            deprecated_synonyms=deprecated_synonyms,
            group=group,
            sources=frozenset() if informational else _ALL_SOURCES,
            check=check,
            valid=valid,
            informational=informational,
        )

    def _register(
        self,
        framework: str,
        component: str | None,
        name: str | None,
        *,
        type: object,
        default: object,
        help: str,
        level: int,
        enumeration: Enumeration | None = None,
        settable: bool = False,
        internal: bool = False,
        synonyms: Sequence[str] = (),
        deprecated_synonyms: Sequence[str] = (),
        group: str | None = None,
        sources: frozenset[Source],
        check: Callable[[Any], None] | None = None,
        valid: str | None = None,
        informational: bool = False,
    ) -> Param:
        full_name = full_name_of(framework, component, name)
        definition = make_definition(
            full_name,
            framework,
            component,
            name,
            type_spec=type,
            default=default,
            help=help,
            level=level,
            enumeration=enumeration,
            settable=settable,
            internal=internal,
            synonyms=synonyms,
            deprecated_synonyms=deprecated_synonyms,
            group=group,
            sources=sources,
            check=check,
            valid=valid,
            informational=informational,
        )
        with self._lock:
            existing = self._params.get(full_name)
            if existing is not None:
                if existing.definition == definition:
                    return existing
                raise ParamRegistrationError(
                    describe_conflict(full_name, existing.definition, definition)
                )
            for other in (full_name, *(s.name for s in definition.synonyms)):
                owner = self._names.get(other)
                if owner is not None:
                    raise ParamRegistrationError(
                        f"cannot register MCA parameter {full_name!r}: the name {other!r} "
                        f"already belongs to {owner.full_name!r}"
                    )
            retired = self._retired.get(full_name)
            if retired is not None and retired.type is definition.type:
                param = retired
                param._redefine(definition)
            else:
                param = Param(full_name, definition)
            param._framework_lock = None
            self._resolve(param)  # may raise: then nothing is registered
            # Every key first: the stores below call no Python code, so an
            # interrupt (a second Ctrl-C) finds the parameter in every index or none.
            group, owned_by = param.group, (param.framework, param.component)
            names = [full_name, *(synonym.name for synonym in definition.synonyms)]
            self._retired.pop(full_name, None)
            param._registered = True
            self._params[full_name] = param
            self._by_group.setdefault(group, {})[full_name] = param
            self._by_owner.setdefault(owned_by, {})[full_name] = param
            self._names.update(dict.fromkeys(names, param))
            return param

    def _resolve(self, param: Param) -> None:
        """Give ``param`` its value from the highest source that names it (or a synonym)."""
        definition = param.definition
        names: list[tuple[str, Synonym | None]] = [(param.full_name, None)]
        names.extend((synonym.name, synonym) for synonym in definition.synonyms)
        for source in LOOKUP_ORDER:
            if source not in definition.sources:
                if definition.informational:
                    self._warn_informational(param, names, source)
                continue
            table = self._pending[source]
            # The real name first: it wins over a synonym given at the same level.
            for name, synonym in names:
                raw = table.get(name)
                if raw is None:
                    continue
                if synonym is not None and synonym.deprecated:
                    warn_deprecated(name, param.full_name, raw.origin)
                value = self._convert(
                    param, raw.value, raw.origin, given_as=name if synonym else None
                )
                param._assign(value, raw.origin)
                if source is Source.OVERRIDE:
                    param._override_lock = f"locked by override file {raw.origin.detail}"
                    self._warn_overridden(param, names, raw.origin)
                else:
                    param._override_lock = None
                return
        param._assign(definition.default, DEFAULT_ORIGIN)
        param._override_lock = None

    def _warn_informational(
        self, param: Param, names: list[tuple[str, Synonym | None]], source: Source
    ) -> None:
        # Open MPI's "default-only-param-set": the value is ignored, and says so.
        for name, _ in names:
            raw = self._pending[source].get(name)
            if raw is not None:
                warn_from_caller(
                    ParamWarning(
                        f"MCA parameter {param.full_name!r} is informational (read-only); "
                        f"ignoring the value {raw.value!r} from {raw.origin}"
                    )
                )

    def _warn_overridden(
        self, param: Param, names: list[tuple[str, Synonym | None]], origin: Origin
    ) -> None:
        # Open MPI's "overridden-param-set": a value the user explicitly gave is ignored.
        for source in (Source.API, Source.ENV):
            for name, _ in names:
                raw = self._pending[source].get(name)
                if raw is not None:
                    warn_from_caller(
                        ParamWarning(
                            f"MCA parameter {param.full_name!r} is set by the override file "
                            f"({origin.detail}); ignoring the value from {raw.origin}"
                        )
                    )

    @staticmethod
    def _convert(param: Param, raw: object, origin: Origin, *, given_as: str | None) -> Any:
        try:
            value = convert(param.type, param.enumeration, raw)
            check = param.definition.check
            if check is not None:
                check(value)
            return value
        except InvalidValue as exc:
            raise ParamValueError(
                param.full_name,
                raw,
                origin,
                param.valid_values(),
                str(exc),
                given_as=given_as or None,
            ) from None

    def add_api_value(self, name: str, value: object) -> None:
        """Give ``name`` a command-line/API value after construction.

        This is how a later session joins a live space: parameters are shared
        by every live session, so a registered parameter must already have
        this value, and a pending one must not have been given another.

        :raises ParamPermissionError: the live space holds a different value.
        :raises ParamValueError: the value is invalid for the parameter.
        """
        origin = Origin(Source.API)
        with self._lock:
            param = self._names.get(name)
            if param is not None:
                wanted = self._convert(param, value, origin, given_as=None)
                if wanted != param.value:
                    raise ParamPermissionError(
                        param.full_name,
                        value,
                        origin,
                        f"the live parameter space, shared by every live session, already "
                        f"has {param.value_string()!r} from {param.origin}",
                    )
                return
            pending = self._pending[Source.API].get(name)
            if pending is not None and str(pending.value) != str(value):
                raise ParamPermissionError(
                    name,
                    value,
                    origin,
                    f"another live session already gave {pending.value!r}",
                )
            self._pending[Source.API][name] = Raw(value, origin)

    def deregister(self, name: str) -> None:
        """Remove one parameter (by full name or synonym) and its synonyms."""
        with self._lock:
            self._remove(self._lookup(name))

    def deregister_group(self, framework: str, component: str | None = None) -> list[str]:
        """Remove a component's parameters, or with ``component=None`` all of a framework's.

        Matches the parameters' deregistration ``group``; returns the full names
        removed, in registration order.
        """
        with self._lock:
            if component is not None:
                doomed = list(self._by_group.get(f"{framework}_{component}", {}).values())
            else:
                doomed = [p for p in self._params.values() if _in_group(p.group, framework, None)]
            for param in doomed:
                self._remove(param)
            return [param.full_name for param in doomed]

    def _remove(self, param: Param) -> None:
        # Tolerant of a parameter already (partly) gone: a close interrupted
        # half-way and retried removes what is left, and finishes.
        name = param.full_name
        self._params.pop(name, None)
        _unindex(self._by_group, param.group, name)
        _unindex(self._by_owner, (param.framework, param.component), name)
        for alias in (name, *(s.name for s in param.synonyms)):
            self._names.pop(alias, None)
        param._registered = False
        self._retired[name] = param

    # -- queries ------------------------------------------------------------------

    def get(self, name: str) -> Param:
        """The registered parameter with this full name or synonym."""
        with self._lock:
            return self._lookup(name)

    def _lookup(self, name: str) -> Param:
        param = self._names.get(name)
        if param is None:
            raise UnknownParamError(name, close_matches(name, self._names, n=3))
        return param

    def value(self, name: str) -> Any:
        """The typed value of a parameter."""
        return self.get(name).value

    def origin(self, name: str) -> Origin:
        """Where a parameter's value came from."""
        return self.get(name).origin

    def __contains__(self, name: object) -> bool:
        with self._lock:
            return isinstance(name, str) and name in self._names

    def params(self, framework: str | None = None, component: str | None = None) -> list[Param]:
        """Registered parameters in registration order, optionally filtered.

        ``component="base"`` also matches parameters registered without a
        component (the selection parameter ``btl``, ``mpi_leave_pinned``), as
        ``pmca info`` lists them under ``<framework> base``.
        """
        with self._lock:
            if framework is not None and component not in (None, "base"):
                return list(self._by_owner.get((framework, component), {}).values())
            return [
                p
                for p in self._params.values()
                if (framework is None or p.framework == framework)
                and (
                    component is None
                    or p.component == component
                    or (component == "base" and p.component is None)
                )
            ]

    def groups(self) -> list[str]:
        """Deregistration groups that have parameters, in registration order."""
        with self._lock:
            return list(dict.fromkeys(p.group for p in self._params.values()))

    def unknown_names(self) -> list[str]:
        """Names given by the API, environment or files that no registered parameter has."""
        return sorted(self.unknown_origins())

    def unknown_origins(self) -> dict[str, Origin]:
        """Like :meth:`unknown_names`, with where each was given (highest source)."""
        with self._lock:
            found: dict[str, Origin] = {}
            for source in LOOKUP_ORDER:
                for name, raw in self._pending[source].items():
                    if name not in self._names and name not in found:
                        found[name] = raw.origin
            return found

    @property
    def environ(self) -> Mapping[str, str]:
        """The environment this space was built from (its ``HOME`` expands ``~``)."""
        return self._environ

    @property
    def param_files(self) -> tuple[str, ...]:
        """The parameter files that were read, leftmost (highest precedence) first."""
        return tuple(self._inputs.files_read)

    @property
    def override_file(self) -> str | None:
        """The override file that was read, if any."""
        return self._inputs.override_read

    # -- run time ------------------------------------------------------------------

    def set(self, name: str, value: object) -> Param:
        """Change a settable parameter at run time (source ``set``).

        :raises ParamPermissionError: the parameter is read-only, its framework
            is locked, or the override file set it.
        :raises ParamValueError: the value is invalid.
        """
        origin = Origin(Source.SET)
        with self._lock:
            param = self._lookup(name)
            synonym = next((s for s in param.synonyms if s.name == name), None)
            if synonym is not None and synonym.deprecated:
                warn_deprecated(name, param.full_name, origin)
            reason = param.read_only_reason
            if reason is not None:
                raise ParamPermissionError(param.full_name, value, origin, reason)
            typed = self._convert(param, value, origin, given_as=name if synonym else None)
            param._assign(typed, origin)
            return param

    def lock(self, framework: str, reason: str | None = None, *, keep: Container[str] = ()) -> None:
        """Make the registered parameters of ``framework`` no longer settable.

        Open MPI freezes a framework's variables once it is open. The lock
        belongs to the parameters registered now: a parameter deregistered
        (at framework close) and registered again starts unlocked, so a
        re-opened framework is never stuck with a stale lock. Names in
        ``keep`` stay settable: their new values take effect while open.
        """
        why = reason or f"locked: framework {framework!r} is open"
        with self._lock:
            for param in self._params.values():
                if param.framework == framework and param.full_name not in keep:
                    param._framework_lock = why

    def unlock(self, framework: str) -> None:
        """Undo :meth:`lock` (for example when the framework closes)."""
        with self._lock:
            for param in self._params.values():
                if param.framework == framework:
                    param._framework_lock = None

    def __repr__(self) -> str:
        return f"<ParamSpace: {len(self._params)} parameters>"


_K = TypeVar("_K")


def _unindex(index: dict[_K, dict[str, Param]], key: _K, name: str) -> None:
    members = index.get(key)
    if members is None:
        return
    members.pop(name, None)
    if not members:
        index.pop(key, None)


def _in_group(group: str, framework: str, component: str | None) -> bool:
    if component is None:
        return group == framework or group.startswith(f"{framework}_")
    return group == f"{framework}_{component}"
