"""What ``pmca info`` reports: an inventory arranged the way ``ompi_info`` walks it.

``ompi_info`` shows *types* (the pseudo framework ``mca`` for the component
architecture's own parameters, then every framework), and inside a type,
*groups* of parameters headed ``MCA <framework> <component>``. A
:class:`Report` holds that arrangement for one inventory; the renderers only
decide how to print it.
"""

from __future__ import annotations

import os
import platform
import sys
from collections.abc import Iterable, Sequence

from attrs import frozen

from .._records import FrozenValue
from .._version import __version__
from ..mca.params import Param, ParamSpace
from ..runtime import ComponentEntry, FrameworkEntry
from ._errors import UsageError

TYPE_CHECKING = False  # typing.TYPE_CHECKING, without importing typing for it
if TYPE_CHECKING:  # annotations only: the failure records are built at the first failure
    from ..mca._failures import ComponentFailure
    from ..runtime._failures import FrameworkFailure

#: The keyword ``--param`` accepts for "every framework" or "every component".
ALL = "all"
#: The component name of framework-level parameters (``btl_base_verbose``).
BASE = "base"
#: The pseudo framework of the component architecture's own parameters.
CORE = "mca"


@frozen(eq=False, repr=False)
class Group(FrozenValue):
    """One ``MCA <framework> <component>`` block of parameters."""

    framework: str
    component: str
    #: Excluded by the framework's selection parameter: ``ompi_info``'s ``(-)``.
    excluded: bool
    params: tuple[Param, ...]

    @property
    def synonym_frameworks(self) -> tuple[str, ...]:
        """Frameworks the group's synonyms are named for (``opal`` for ``opal_leave_pinned``)."""
        owners = (
            synonym.name.split("_", 1)[0]
            for param in self.params
            for synonym in param.synonyms
            if not synonym.name.startswith(f"{param.framework}_")
        )
        return tuple(dict.fromkeys(owners))

    @property
    def label(self) -> str:
        marker = " (-)" if self.excluded else ""
        return f"MCA{marker} {self.framework} {self.component}"


@frozen(eq=False, repr=False)
class Section(FrozenValue):
    """Everything ``--param <name> all`` shows: one framework or pseudo framework."""

    name: str
    entry: FrameworkEntry | None
    groups: tuple[Group, ...]


@frozen(eq=False, repr=False)
class Selector(FrozenValue):
    """One ``--param FRAMEWORK COMPONENT`` request; either may be ``all``."""

    framework: str = ALL
    component: str = ALL

    def wants_framework(self, name: str) -> bool:
        return self.framework in (ALL, name)

    def wants_component(self, name: str) -> bool:
        return self.component in (ALL, name)

    def wants_group(self, section: Section, group: Group) -> bool:
        # ``--param mpi all`` finds mpi_leave_pinned although the memory base
        # registers it: a group answers to its own framework name too, and
        # ``--param opal all`` to its synonyms' (opal_leave_pinned).
        names = (ALL, section.name, group.framework, *group.synonym_frameworks)
        return self.framework in names and self.wants_component(group.component)


@frozen(eq=False, repr=False)
class ParamFilter(FrozenValue):
    """Which parameters are shown: ``--level``, ``--internal`` and ``-t/--type``."""

    level: int
    internal: bool = False
    #: Type names (``int``, ``bool``, ...) to show; empty shows every type.
    types: frozenset[str] = frozenset()

    def shows(self, param: Param) -> bool:
        return (
            int(param.level) <= self.level
            and (self.internal or not param.internal)
            and (not self.types or param.type.type_name in self.types)
        )


@frozen(eq=False, repr=False)
class Listing(FrozenValue):
    """One framework's lines in the component list."""

    entry: FrameworkEntry
    components: tuple[ComponentEntry, ...]
    failures: tuple[ComponentFailure, ...]


@frozen(eq=False, repr=False)
class Fact(FrozenValue):
    """One header line: a readable label, a parsable key and the value."""

    label: str
    key: str
    value: str
    #: Shown after the value in readable output only, in parentheses.
    detail: str = ""

    @property
    def readable(self) -> str:
        return f"{self.value} ({self.detail})" if self.detail else self.value


def _groups(params: Iterable[Param]) -> list[Group]:
    """Group parameters by the framework and component their names carry."""
    grouped: dict[tuple[str, str], list[Param]] = {}
    for param in params:
        grouped.setdefault((param.framework, param.component or BASE), []).append(param)
    return [Group(fw, comp, False, tuple(ps)) for (fw, comp), ps in grouped.items()]


@frozen(eq=False, repr=False)
class Report(FrozenValue):
    """An inventory arranged into sections and groups, plus what failed."""

    entries: tuple[FrameworkEntry, ...]
    framework_failures: tuple[FrameworkFailure, ...]
    sections: tuple[Section, ...]

    @classmethod
    def build(
        cls,
        entries: Sequence[FrameworkEntry],
        framework_failures: Sequence[FrameworkFailure],
        space: ParamSpace,
    ) -> Report:
        claimed: set[Param] = set()
        for entry in entries:
            claimed.update(entry.params)
            for component in entry.components:
                claimed.update(component.params)
        # What no framework claims: the mca_base_* parameters, and anything
        # registered outside a framework (shown under its own name).
        loose: dict[str, list[Param]] = {CORE: []}
        for param in space.params():
            if param not in claimed:
                loose.setdefault(param.framework, []).append(param)
        sections = [Section(CORE, None, tuple(_groups(loose.pop(CORE))))]
        for entry in entries:
            name = entry.framework.name
            groups = _groups([*entry.params, *loose.pop(name, [])])
            groups.extend(Group(name, c.name, not c.admitted, c.params) for c in entry.components)
            sections.append(Section(name, entry, tuple(groups)))
        sections.extend(Section(name, None, tuple(_groups(ps))) for name, ps in loose.items())
        return cls(tuple(entries), tuple(framework_failures), tuple(sections))

    # -- what exists ---------------------------------------------------------

    def type_names(self) -> list[str]:
        """Every name ``--param`` accepts as a framework, in output order."""
        names = [section.name for section in self.sections]
        for section in self.sections:
            names.extend(group.framework for group in section.groups)
        for section in self.sections:
            for group in section.groups:
                names.extend(group.synonym_frameworks)
        names.extend(failure.name for failure in self.framework_failures)
        return list(dict.fromkeys(names))

    def component_names(self, framework: str) -> list[str]:
        """Every name ``--param <framework>`` accepts as a component."""
        selector = Selector(framework)
        names = [BASE]
        for section in self.sections:
            names.extend(g.component for g in section.groups if selector.wants_group(section, g))
        for listing in self.listings([selector]):
            names.extend(c.name for c in listing.components)
            names.extend(f.component for f in listing.failures)
        return list(dict.fromkeys(names))

    def check(self, selectors: Sequence[Selector]) -> None:
        """Refuse a ``--param`` naming a framework or component that does not exist."""
        for selector in selectors:
            types = self.type_names()
            if selector.framework != ALL and selector.framework not in types:
                installed = {entry.framework.name for entry in self.entries}
                frameworks = [t for t in types if t in installed]
                groups = [t for t in types if t not in frameworks]
                raise UsageError(
                    f"--param: unknown framework {selector.framework!r}; frameworks: "
                    f"{', '.join(frameworks) or '(none)'}"
                    + (f"; other parameter groups: {', '.join(groups)}" if groups else "")
                )
            known = self.component_names(selector.framework)
            if selector.component != ALL and selector.component not in known:
                where = (
                    "any framework"
                    if selector.framework == ALL
                    else f"framework {selector.framework!r}"
                )
                raise UsageError(
                    f"--param: unknown component {selector.component!r} in {where}; "
                    f"known: {', '.join(known)}"
                )

    # -- what is shown -------------------------------------------------------

    def listings(
        self, selectors: Sequence[Selector], *, selected_only: bool = False
    ) -> list[Listing]:
        """The component list: every framework, or those ``selectors`` name.

        With the default selector every framework is listed, even one without
        components; a narrower one lists only frameworks with something to show.
        """
        everything = any(s.framework == ALL and s.component == ALL for s in selectors)
        listings = []
        for entry in self.entries:
            name = entry.framework.name
            wanted = [s for s in selectors if s.wants_framework(name)]
            components = tuple(
                c
                for c in entry.components
                if any(s.wants_component(c.name) for s in wanted)
                and (c.admitted or not selected_only)
            )
            failures = tuple(
                f for f in entry.failures if any(s.wants_component(f.component) for s in wanted)
            )
            if everything or components or failures:
                listings.append(Listing(entry, components, failures))
        return listings

    def wanted_framework_failures(self, selectors: Sequence[Selector]) -> list[FrameworkFailure]:
        return [
            f for f in self.framework_failures if any(s.wants_framework(f.name) for s in selectors)
        ]

    def param_groups(
        self,
        selectors: Sequence[Selector],
        shown: ParamFilter,
        *,
        selected_only: bool = False,
    ) -> list[tuple[Section, Group]]:
        """The groups to print, each cut down to the parameters ``shown`` admits.

        Groups left empty are dropped, as ``ompi_info`` prints no header for them.
        """
        result = []
        for section in self.sections:
            for group in section.groups:
                if selected_only and group.excluded:
                    continue
                if not any(s.wants_group(section, group) for s in selectors):
                    continue
                params = tuple(p for p in group.params if shown.shows(p))
                if params:
                    result.append(
                        (section, Group(group.framework, group.component, group.excluded, params))
                    )
        return result


def load_mode_summary(dso: str, static: str, modes: Iterable[str] = ()) -> str:
    """``static``, ``dso`` or ``mixed``: how the listed components load.

    ``modes`` are the load modes of the components listed: when both occur
    the answer is ``mixed``, whatever ``mca_base_component_dso/static`` ask
    for (a component may force static loading). With no component listed,
    the settings alone answer.
    """
    seen = set(modes)
    if seen:
        return seen.pop() if len(seen) == 1 else "mixed"
    if dso.strip() == "none" or static.strip() == "all":
        return "static"
    if dso.strip() == "all" and static.strip() == "none":
        return "dso"
    return "mixed"


def load_mode_counts(entries: Iterable[FrameworkEntry]) -> dict[str, int]:
    """How many of the listed components load each way: ``{"static": n, "dso": m}``."""
    counts = {"static": 0, "dso": 0}
    for entry in entries:
        for component in entry.components:
            counts[component.load_mode] = counts.get(component.load_mode, 0) + 1
    return counts


def load_mode_fact(dso: str, static: str, entries: Iterable[FrameworkEntry]) -> Fact:
    """``Component load mode``: ``mixed`` says, readably, how many load each way."""
    counts = load_mode_counts(entries)
    summary = load_mode_summary(dso, static, (mode for mode, n in counts.items() if n))
    detail = ""
    if summary == "mixed" and any(counts.values()):
        detail = f"{counts['static']} static, {counts['dso']} dso components"
    return Fact("Component load mode", "option:load-mode", summary, detail)


def platform_name() -> str:
    """``platform.platform()``'s text, without the ``uname -p`` child process it
    starts to learn the processor (which Linux reports as unknown anyway)."""
    system, _, release, _, machine = os.uname()
    libc, libc_version = platform.libc_ver()
    parts = [system, release, machine, *(["with", libc + libc_version] if libc else [])]
    return "-".join(part.replace(" ", "_") for part in parts if part)


def header(space: ParamSpace, entries: Iterable[FrameworkEntry] = ()) -> list[Fact]:
    """The lines before the component list: versions, platform, load modes, files."""
    dso = space.get("mca_base_component_dso")
    static = space.get("mca_base_component_static")
    files = ", ".join(space.param_files) or "(none found)"
    facts = [
        Fact("pmca", "pmca:version:full", __version__),
        Fact(
            "Python",
            "python:version:full",
            f"{platform.python_version()} ({platform.python_implementation()})",
        ),
        Fact("Platform", "config:platform", platform_name()),
        Fact("Configured architecture", "config:arch", f"{platform.machine()}-{sys.platform}"),
        *build_facts(),
        Fact("Prefix", "path:prefix", sys.prefix),
        load_mode_fact(dso.value_string(), static.value_string(), entries),
        Fact("Load as dso", "option:load-mode:dso", dso.value_string(), _source(dso)),
        Fact("Load statically", "option:load-mode:static", static.value_string(), _source(static)),
        Fact("MCA parameter files", "path:param-files", files),
    ]
    if space.override_file is not None:
        facts.append(Fact("MCA override file", "path:override-file", space.override_file))
    return facts


def _source(param: Param) -> str:
    return f"{param.full_name}, data source: {param.origin}"


#: ``--path`` names, as ``ompi_info --path`` accepts them.
PATHS = (
    "prefix",
    "exec_prefix",
    "bindir",
    "libdir",
    "incdir",
    "pkglibdir",
    "datadir",
    "sysconfdir",
)


def path_facts(which: str) -> list[Fact]:
    """``--path <name|all>``: where this pmca lives (its Python's install scheme)."""
    import sysconfig
    from pathlib import Path

    paths = sysconfig.get_paths()
    package = str(Path(__file__).resolve().parents[1])
    values = {
        "prefix": sys.prefix,
        "exec_prefix": sys.exec_prefix,
        "bindir": paths["scripts"],
        "libdir": paths["purelib"],
        "incdir": paths["include"],
        "pkglibdir": package,
        "datadir": paths["data"],
        "sysconfdir": str(Path(sys.prefix) / "etc"),
    }
    names = PATHS if which == ALL else (which,)
    return [Fact(name.capitalize(), f"path:{name}", values[name]) for name in names]


def arch_fact() -> Fact:
    return Fact("Configured architecture", "config:arch", f"{platform.machine()}-{sys.platform}")


def hostname_fact() -> Fact:
    # pmca has no configure step: the host that matters is the one it runs on.
    return Fact("Configure host", "config:host", platform.node())


def build_facts() -> list[Fact]:
    """The compiler and glibc the native libraries were built with, and the glibc they need."""
    from .._build import build_info

    info = build_info()
    return [
        Fact("Built with", "config:compiler:build", info.compiler or "(not recorded)"),
        Fact("Built against glibc", "config:glibc:build", info.glibc or "(not recorded)"),
        Fact("Needs glibc", "config:glibc:needed", info.glibc_needed or "(no native libraries)"),
    ]


def config_facts() -> list[Fact]:
    """``-c/--config``: how this pmca was built and what it runs on."""
    import sysconfig

    from .. import native

    libc, libc_version = platform.libc_ver()
    compiler = str(sysconfig.get_config_var("CC") or "cc").split()[0]
    reason = native.unavailable_reason()
    return [
        Fact("pmca", "pmca:version:full", __version__),
        Fact("Python", "python:version:full", platform.python_version()),
        Fact("Python implementation", "python:implementation", platform.python_implementation()),
        arch_fact(),
        hostname_fact(),
        Fact("Platform", "config:platform", platform_name()),
        Fact("C library", "config:libc", f"{libc} {libc_version}".strip() or "unknown"),
        Fact("C compiler", "compiler:c:command", compiler),
        *build_facts(),
        Fact(
            "Native memory hooks",
            "option:native-hooks",
            "yes" if reason is None else "no",
            "" if reason is None else reason,
        ),
    ]
