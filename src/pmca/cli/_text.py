"""Readable and parsable output of ``pmca info``, laid out like ``ompi_info``'s.

One walk over the report (:func:`render`) drives one of two emitters, as
``ompi_info`` drives ``opal_info_out`` in pretty or parsable mode:

* readable: ``<label>: <value>`` rows, labels right-aligned to one column
  (24 wide, like ``ompi_info``, or wider if a label needs it), continuation
  rows indented to the value column;
* parsable: ``<key>:<value>`` lines, the value double-quoted when it contains
  a ``:`` (embedded quotes escaped), and parameter lines exactly as
  :func:`pmca.mca.params.format_parsable` makes them.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Protocol

from attrs import frozen

from .._records import FrozenValue
from .._version import __version__
from ..mca._events import EventType
from ..mca._pvars import PVar
from ..mca.params import Param, ParamSpace, Synonym, format_parsable, format_readable
from ..runtime import ComponentEntry, FrameworkEntry
from ._model import BASE, Fact, Group, ParamFilter, Report, Selector, header

TYPE_CHECKING = False  # typing.TYPE_CHECKING, without importing typing for it
if TYPE_CHECKING:  # annotations only: the failure records are built at the first failure
    from ..mca._failures import ComponentFailure
    from ..runtime._failures import FrameworkFailure

#: ``ompi_info``'s centerpoint: the column labels are right-aligned to.
CENTER = 24
#: ``ompi_info``'s separator before each group of parameters.
SEPARATOR = "-" * 51
#: Shown as the MCA version of every component: pmca's own, the version of
#: the machinery (Open MPI shows its MCA struct version, 2.1.0).
MCA_VERSION = __version__


@frozen(eq=False, repr=False)
class View(FrozenValue):
    """What one ``pmca info`` invocation shows."""

    selectors: tuple[Selector, ...]
    shown: ParamFilter
    header: bool = False
    components: bool = False
    params: bool = False
    #: Failed components and frameworks in detail (``--show-failed``).
    failures: bool = False
    #: A count of failures at the end, pointing at ``--show-failed``.
    summary: bool = False
    selected_only: bool = False
    #: Lines asked for by ``--path``, ``--arch``, ``-c/--config``, ``--hostname``.
    facts: tuple[Fact, ...] = ()


class Emitter(Protocol):
    """The two output styles; :func:`render` decides what, an emitter how."""

    def fact(self, fact: Fact) -> None: ...

    def framework(self, entry: FrameworkEntry, empty: bool) -> None: ...

    def component(self, entry: FrameworkEntry, component: ComponentEntry) -> None: ...

    def failed(self, failure: ComponentFailure, *, detail: bool) -> None: ...

    def framework_failed(self, failure: FrameworkFailure, *, detail: bool) -> None: ...

    def group(self, group: Group) -> None: ...

    def summary(self, failed: Sequence[str]) -> None: ...


def render(report: Report, view: View, space: ParamSpace, emitter: Emitter) -> None:
    """Walk the report in ``ompi_info``'s order: header, components, parameters."""
    if view.header:
        for fact in header(space, report.entries):
            emitter.fact(fact)
    for fact in view.facts:
        emitter.fact(fact)
    failed: list[str] = []
    if view.components or view.failures:
        for listing in report.listings(view.selectors, selected_only=view.selected_only):
            if view.components:
                empty = not (listing.components or listing.failures)
                emitter.framework(listing.entry, empty)
                for component in listing.components:
                    emitter.component(listing.entry, component)
            for failure in listing.failures:
                emitter.failed(failure, detail=view.failures)
                failed.append(f"{failure.framework}/{failure.component}")
        for framework_failure in report.wanted_framework_failures(view.selectors):
            emitter.framework_failed(framework_failure, detail=view.failures)
            failed.append(framework_failure.label)
    if view.params:
        for _section, group in report.param_groups(
            view.selectors, view.shown, selected_only=view.selected_only
        ):
            emitter.group(group)
    if (view.summary and failed and not view.failures) or (view.failures and not failed):
        emitter.summary(failed)


# -- helpers shared by both styles ---------------------------------------------


def one_line(text: str) -> str:
    """Multi-line text (exception messages) as one line, for line-based output."""
    return re.sub(r"\s*\n\s*", " ", text.strip())


def selection_of(entry: FrameworkEntry) -> Param | None:
    """The framework's selection parameter (``memory``, ``btl``), if registered."""
    return next((p for p in entry.params if p.full_name == entry.framework.name), None)


def synonym_owner(param: Param, synonym: Synonym) -> tuple[str, str]:
    """The framework and component a synonym's own entry is listed under.

    The same rule as ``format_parsable``: a synonym named for another
    framework (``opal_leave_pinned`` for ``mpi_leave_pinned``) goes under it.
    """
    if synonym.name.startswith(f"{param.framework}_"):
        return param.framework, param.component or BASE
    return synonym.name.split("_", 1)[0], BASE


def _versions(component: ComponentEntry) -> str:
    return f"MCA v{MCA_VERSION}, API v{component.api_version}, Component v{component.version}"


# -- readable -----------------------------------------------------------------


class Readable:
    """``ompi_info``'s pretty-print style."""

    def __init__(self) -> None:
        #: ``(label, value)``; an empty label continues the row above.
        self.rows: list[tuple[str, str]] = []

    def _out(self, label: str, value: str) -> None:
        self.rows.append((label, value))

    def _more(self, *values: str) -> None:
        self.rows.extend(("", value) for value in values)

    def fact(self, fact: Fact) -> None:
        self._out(fact.label, fact.readable)

    def framework(self, entry: FrameworkEntry, empty: bool) -> None:
        if empty:
            self._out(f"MCA {entry.framework.name}", "(no components found)")

    def component(self, entry: FrameworkEntry, component: ComponentEntry) -> None:
        text = (
            f"{component.name} ({_versions(component)}) {component.load_mode}, {component.location}"
        )
        selection = selection_of(entry)
        if not component.admitted and selection is not None:
            text += f'; excluded by {selection.full_name}="{selection.value_string()}"'
        self._out(f"MCA {entry.framework.name}", text)

    def failed(self, failure: ComponentFailure, *, detail: bool) -> None:
        self._out(
            f"MCA {failure.framework}",
            f"{failure.component} (failed to load) {one_line(failure.reason)}",
        )
        if detail:
            self._more(f"location: {failure.location}")
            if failure.distribution:
                self._more(f"distribution: {failure.distribution}")
            self._more(*failure.traceback.rstrip().splitlines())

    def framework_failed(self, failure: FrameworkFailure, *, detail: bool) -> None:
        what = "(framework failed to load)"
        if failure.clash is not None:
            what = "(third-party framework ignored: name clash)"
        self._out(f"MCA {failure.name}", f"{what} {one_line(failure.reason)}")
        if detail:
            self._more(f"location: {failure.location}")
            if failure.distribution:
                self._more(f"distribution: {failure.distribution}")

    def group(self, group: Group) -> None:
        self._out(group.label, SEPARATOR)
        for param in group.params:
            first, *rest = format_readable(param)
            self._out(group.label, first)
            self._more(*rest)
            for synonym in param.synonyms:
                framework, component = synonym_owner(param, synonym)
                label = Group(framework, component, group.excluded, ()).label
                first, *rest = format_readable(param, name=synonym.name)
                self._out(label, first)
                self._more(*rest)

    def summary(self, failed: Sequence[str]) -> None:
        if not failed:
            self._out(
                "Failed to load",
                "none: every framework and component imported and registered "
                "(open and query are not run here: 'pmca info --check' runs them)",
            )
            return
        self._out(
            "Failed to load",
            f"{len(failed)} ({', '.join(failed)}); 'pmca info --show-failed' shows why",
        )

    def pvar(self, pvar: PVar) -> None:
        self._out(f"pvar {pvar.name}", pvar_summary(pvar))
        self._more(pvar.description)

    def event(self, event: EventType) -> None:
        self._out(f"event {event.name}", f"fields {', '.join(event.fields)}; level {event.level}")
        self._more(event.description)

    def lines(self, width: int | None = None) -> list[str]:
        """The rows laid out; values wrapped at ``width`` columns if given (a terminal)."""
        center = max([CENTER, *(len(label) for label, _ in self.rows)])
        indent = " " * (center + 2)
        out: list[str] = []
        for label, value in self.rows:
            first = f"{label:>{center}}: " if label else indent
            pieces = [value]
            if width is not None and len(indent) + len(value) > width:
                # Like ompi_info on a terminal: break at spaces, never inside a word.
                import textwrap  # on a terminal only, like the wrapping

                pieces = textwrap.wrap(
                    value,
                    width=max(20, width - len(indent)),
                    break_long_words=False,
                    break_on_hyphens=False,
                ) or [value]
            out.append((first + pieces[0]).rstrip())
            out.extend((indent + piece).rstrip() for piece in pieces[1:])
        return out


def pvar_fields(pvar: PVar) -> list[tuple[str, str]]:
    """A pvar's fields as text, in the order every output format lists them."""
    flags = [f.name.lower() for f in type(pvar.flags) if f in pvar.flags and f.name]
    return [
        ("class", pvar.klass.value),
        ("type", pvar.type),
        ("unit", pvar.unit),
        ("level", str(pvar.level)),
        ("binding", pvar.binding.value),
        ("flags", ",".join(flags)),
        ("description", pvar.description),
    ]


def pvar_summary(pvar: PVar) -> str:
    bound = "" if pvar.binding.value == "none" else f", per {pvar.binding.value}"
    unit = f" ({pvar.unit})" if pvar.unit else ""
    return f"{pvar.klass.value}{unit}, level {pvar.level}{bound}"


# -- parsable -----------------------------------------------------------------


def plain(key: str, value: str) -> str:
    """``opal_info_out`` in parsable mode: quotes escaped, quoted if a ``:`` is inside."""
    text = one_line(value).replace('"', '\\"')
    return f'{key}:"{text}"' if ":" in text else f"{key}:{text}"


def _disabled(lines: list[str], excluded: bool) -> list[str]:
    # format_parsable cannot know about selection and always ends with
    # ``disabled:false``; ompi_info prints ``true`` for an excluded component.
    if excluded and lines and lines[-1].endswith(":disabled:false"):
        return [*lines[:-1], lines[-1][: -len("false")] + "true"]
    return lines


class Parsable:
    """``ompi_info --parsable``."""

    def __init__(self) -> None:
        self.out: list[str] = []

    def fact(self, fact: Fact) -> None:
        self.out.append(plain(fact.key, fact.value))

    def framework(self, entry: FrameworkEntry, empty: bool) -> None:
        framework = entry.framework
        key = f"framework:{framework.name}"
        self.out.extend(
            [
                plain(f"{key}:version", f"api:{framework.api_version}"),
                plain(f"{key}:policy", framework.policy),
                plain(f"{key}:location", entry.location),
                plain(f"{key}:components", str(len(entry.components))),
            ]
        )

    def component(self, entry: FrameworkEntry, component: ComponentEntry) -> None:
        key = f"mca:{entry.framework.name}:{component.name}"
        self.out.extend(
            [
                plain(f"{key}:version", f"mca:{MCA_VERSION}"),
                plain(f"{key}:version", f"api:{component.api_version}"),
                plain(f"{key}:version", f"component:{component.version}"),
                plain(f"{key}:load-mode", component.load_mode),
                plain(f"{key}:location", component.location),
            ]
        )
        if component.distribution:
            self.out.append(plain(f"{key}:distribution", component.distribution))
        self.out.append(plain(f"{key}:disabled", "false" if component.admitted else "true"))

    def failed(self, failure: ComponentFailure, *, detail: bool) -> None:
        key = f"mca:{failure.framework}:{failure.component}"
        self.out.append(plain(f"{key}:failed", failure.reason))
        if detail:
            self.out.append(plain(f"{key}:location", failure.location))
            if failure.distribution:
                self.out.append(plain(f"{key}:distribution", failure.distribution))

    def framework_failed(self, failure: FrameworkFailure, *, detail: bool) -> None:
        key = f"framework:{failure.name}"
        self.out.append(plain(f"{key}:failed", failure.reason))
        if detail:
            self.out.append(plain(f"{key}:location", failure.location))
            if failure.distribution:
                self.out.append(plain(f"{key}:distribution", failure.distribution))
            if failure.clash is not None:
                self.out.append(plain(f"{key}:clashes-with", failure.clash))

    def group(self, group: Group) -> None:
        for param in group.params:
            self.out.extend(_disabled(format_parsable(param), group.excluded))
            for synonym in param.synonyms:
                lines = format_parsable(param, name=synonym.name)
                self.out.extend(_disabled(lines, group.excluded))

    def summary(self, failed: Sequence[str]) -> None:
        """Nothing: every failure already has its ``failed`` line."""

    def pvar(self, pvar: PVar) -> None:
        key = f"pvar:{pvar.name}"
        self.out.extend(plain(f"{key}:{field}", value) for field, value in pvar_fields(pvar))

    def event(self, event: EventType) -> None:
        key = f"event:{event.name}"
        fields = (
            ("fields", ",".join(event.fields)),
            ("level", str(event.level)),
            ("description", event.description),
        )
        self.out.extend(plain(f"{key}:{field}", value) for field, value in fields)

    def lines(self) -> list[str]:
        return list(self.out)
