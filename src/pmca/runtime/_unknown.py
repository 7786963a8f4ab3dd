"""Warnings for parameter names that no parameter has: typos, mostly.

Parameters register lazily (a component's when its framework opens, and an
unselected component's never), so a name is only called unknown when pmca
can tell: it lies in pmca's namespace (``mca_*`` or an installed framework's
``<fw>_*``) and the framework, or the component the name points into, has
registered its parameters. A name in a component that was never imported
(excluded by the selection) may be right: nothing is said. Elsewhere a name
is only reported when it is close to a registered one, or when every
installed framework has registered its parameters (``pmca info``, or a
session that opened them all).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING

from attrs import frozen

from .._records import FrozenValue
from ..mca._names import close_matches as _close
from ..mca.params import Origin, ParamSpace

if TYPE_CHECKING:
    from ..mca._open import OpenFramework

CORE = "mca"

#: How many unknown names get a "did you mean" search (difflib against every
#: registered name): past this, a file of thousands of unknown keys costs a
#: dictionary lookup per key, not seconds.
SUGGESTIONS = 32


@frozen(eq=False, repr=False)
class Namespace(FrozenValue):
    """What one framework registered: its own names and each imported component's."""

    own: frozenset[str]
    found: frozenset[str]
    registered: Mapping[str, frozenset[str]]


def unknown_name_messages(
    space: ParamSpace,
    namespaces: Mapping[str, Namespace],
    disabled: Iterable[str],
    *,
    complete: bool,
) -> dict[str, str]:
    """``{name: message}`` for every given name pmca can tell no parameter has.

    ``complete``: every installed framework has registered its parameters, so
    a name outside every framework's namespace is unknown too (otherwise it
    is only reported when it is close to a registered name).
    """
    skip = set(disabled)
    messages: dict[str, str] = {}
    known = [p.full_name for p in space.params()]
    searches = 0

    def _message(name: str, origin: Origin, candidates: list[str], problem: str) -> str:
        nonlocal searches
        searches += 1
        return _text(name, origin, candidates if searches <= SUGGESTIONS else [], problem)

    def close_matches(name: str, candidates: list[str], *, n: int, cutoff: float) -> list[str]:
        nonlocal searches
        searches += 1
        return _close(name, candidates, n=n, cutoff=cutoff) if searches <= SUGGESTIONS else []

    for name, origin in space.unknown_origins().items():
        framework, _, rest = name.partition("_")
        if framework in skip:
            continue
        if framework == CORE:
            messages[name] = _message(name, origin, known, "no such pmca parameter")
            continue
        namespace = namespaces.get(framework)
        if namespace is None:
            close = close_matches(name, known, n=3, cutoff=0.8)
            if close or complete:
                messages[name] = _message(
                    name, origin, close, "no installed framework or component has it"
                )
            continue
        component = _component_of(rest, namespace.found)
        if component is None:
            if rest.startswith("base_") or not rest:
                messages[name] = _message(
                    name,
                    origin,
                    sorted(namespace.own),
                    f"framework {framework!r} has no such parameter",
                )
            else:
                messages[name] = _message(
                    name,
                    origin,
                    known,
                    f"framework {framework!r} has no component of that name "
                    f"(components: {', '.join(sorted(namespace.found)) or '(none)'})",
                )
            continue
        names = namespace.registered.get(component)
        # A component that registered and then closed (not selected) had the name.
        if names is not None and name not in names:
            messages[name] = _message(
                name,
                origin,
                sorted(names),
                f"component {framework}/{component} has no such parameter",
            )
    return messages


def _component_of(rest: str, found: Iterable[str]) -> str | None:
    """The component whose parameters ``<fw>_<rest>`` would be (longest name first)."""
    for component in sorted(found, key=len, reverse=True):
        if rest.startswith(component + "_"):
            return component
    return None


def _text(name: str, origin: Origin, candidates: list[str], problem: str) -> str:
    close = _close(name, candidates, n=3, cutoff=0.6) if candidates else []
    hint = f"; did you mean {', '.join(repr(c) for c in close)}?" if close else ""
    return f"unknown MCA parameter {name!r} (from {origin}): {problem}, the value is ignored{hint}"


def unregistered_reason(
    name: str, frameworks: Mapping[str, OpenFramework], installed: Iterable[str]
) -> str | None:
    """Why ``name``, which may well exist (``pmca info`` lists it), is not registered now.

    ``None`` when pmca cannot tell it exists: the name is then simply unknown.
    """
    framework, _, rest = name.partition("_")
    state = frameworks.get(framework)
    if state is None:
        if framework in installed:
            return (
                f"framework {framework!r} is not open in this session; its parameters are "
                f"registered while it is open (pmca info --param {framework} all lists them)"
            )
        return None
    component = _component_of(rest, state.found)
    if component is None:
        return None
    listing = f"pmca info --param {framework} {component} lists them"
    names = state.registered.get(component)
    if names is not None:
        if name not in names:
            return None
        return (
            f"component {framework}/{component} was not selected (it declined, failed or "
            f"lost to a higher priority and was closed); its parameters are registered "
            f"only while it is open ({listing})"
        )
    selection = state.host.params.get(framework)
    return (
        f"component {framework}/{component} is excluded by the selection "
        f"{framework}={selection.value!r} (from {selection.origin}) and was never loaded; "
        f"its parameters are registered only while it is open ({listing})"
    )
