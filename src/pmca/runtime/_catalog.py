"""The installed frameworks: pmca's own plus those of ``pmca.frameworks``.

A broken declaration stays with the frameworks it concerns: one that fails
to load, declares a name already taken, depends on a framework that is not
installed or sits on a dependency cycle is *disabled* (recorded in
:attr:`Catalog.failures`, shown by ``pmca info`` and ``pmca doctor``), as
is everything that depends on it; every other framework works. pmca's own
frameworks win a name over any third party's; two third-party frameworks
with the same name are both disabled, since neither is the obvious one.
"""

from __future__ import annotations

import importlib
from collections.abc import Iterator, MutableMapping
from typing import TYPE_CHECKING

from attrs import define, field

from .._records import Value
from ..mca._discovery import EntryPointIndex, distribution_label
from ..mca._errors import FrameworkError
from ..mca._framework import Framework
from ..mca.params import ParamSpace

if TYPE_CHECKING:
    from ._failures import FrameworkFailure

#: pmca's own frameworks, ``module:attribute`` of their declaration, each in
#: ``pmca.<framework name>``; they depend on one another only.
BUILTIN_FRAMEWORKS: tuple[str, ...] = (
    "pmca.patcher._framework:FRAMEWORK",
    "pmca.memory._framework:FRAMEWORK",
    "pmca.rcache._framework:FRAMEWORK",
    "pmca.btl._framework:FRAMEWORK",
)


def _failure(
    name: str,
    location: str,
    reason: str,
    distribution: str | None = None,
    clash: str | None = None,
) -> FrameworkFailure:
    from ._failures import FrameworkFailure

    return FrameworkFailure(name, location, reason, distribution, clash)


class _NameClash(FrameworkError):
    """A third-party framework declares the name of a built-in one."""


def builtin_name(target: str) -> str:
    """The name of the framework one of :data:`BUILTIN_FRAMEWORKS` declares."""
    return target.split(".")[1]


def load_builtin(target: str) -> Framework:
    """One of :data:`BUILTIN_FRAMEWORKS`, imported."""
    module_name, _, attribute = target.partition(":")
    framework = getattr(importlib.import_module(module_name), attribute)
    assert isinstance(framework, Framework) and framework.name == builtin_name(target)
    return framework


class Frameworks(MutableMapping[str, Framework]):
    """Frameworks by name, in discovery order; pmca's own are imported at first use.

    A session that opens one framework imports only its declaration and its
    dependencies'. Iterating the names imports nothing; reading a value does.
    """

    def __init__(self) -> None:
        #: A framework, or the ``module:attribute`` of a built-in one not yet imported.
        self._entries: dict[str, Framework | str] = {}

    def add_builtin(self, target: str) -> None:
        self._entries[builtin_name(target)] = target

    def loaded(self, name: str) -> Framework | None:
        """The framework called ``name`` if it is imported, without importing it."""
        entry = self._entries.get(name)
        return entry if isinstance(entry, Framework) else None

    def __getitem__(self, name: str) -> Framework:
        entry = self._entries[name]
        if isinstance(entry, str):
            entry = self._entries[name] = load_builtin(entry)
        return entry

    def __setitem__(self, name: str, framework: Framework) -> None:
        self._entries[name] = framework

    def __delitem__(self, name: str) -> None:
        del self._entries[name]

    def __iter__(self) -> Iterator[str]:
        return iter(self._entries)

    def __len__(self) -> int:
        return len(self._entries)

    def __contains__(self, name: object) -> bool:
        return name in self._entries


@define(eq=False, repr=False)
class Catalog(Value):
    """Frameworks by name, in discovery order, and the ones that failed."""

    entry_points: EntryPointIndex = field(factory=lambda: EntryPointIndex(()))
    frameworks: Frameworks = field(factory=Frameworks)
    failures: list[FrameworkFailure] = field(factory=list)
    locations: dict[str, str] = field(factory=dict)

    @classmethod
    def discover(cls) -> Catalog:
        catalog = cls(EntryPointIndex.scan())
        for target in BUILTIN_FRAMEWORKS:
            catalog.frameworks.add_builtin(target)
            catalog.locations[builtin_name(target)] = f"built-in ({target})"
        builtin = set(catalog.frameworks)
        third_party: dict[str, list[tuple[Framework, str]]] = {}
        for entry_point in catalog.entry_points.group("pmca.frameworks"):
            location = f"entry point pmca.frameworks:{entry_point.name} = {entry_point.value}"
            dist = distribution_label(entry_point)
            if dist is not None:
                location += f" (distribution {dist})"
            try:
                framework = entry_point.load()
                if not isinstance(framework, Framework):
                    raise FrameworkError(f"{framework!r} is not a pmca.Framework")
                if framework.name != entry_point.name:
                    raise FrameworkError(
                        f"declares name {framework.name!r}, entry point says {entry_point.name!r}"
                    )
                if framework.name in builtin:
                    who = f"distribution {dist}" if dist else "this entry point"
                    raise _NameClash(
                        f"{who} declares a framework named {framework.name!r}, the name of "
                        f"pmca's built-in framework ({catalog.locations[framework.name]}): "
                        f"the built-in {framework.name} is used, this declaration is ignored"
                    )
            except _NameClash as exc:
                catalog.failures.append(
                    _failure(
                        entry_point.name,
                        location,
                        f"FrameworkError: {exc}",
                        dist,
                        catalog.locations[entry_point.name],
                    )
                )
                continue
            except Exception as exc:
                catalog.failures.append(
                    _failure(entry_point.name, location, f"{type(exc).__name__}: {exc}", dist)
                )
                continue
            third_party.setdefault(framework.name, []).append((framework, location))
        for name, offers in third_party.items():
            if len(offers) == 1:
                catalog._add(*offers[0])
                continue
            for _, location in offers:
                others = "; ".join(where for _, where in offers if where != location)
                catalog.failures.append(
                    _failure(
                        name, location, f"FrameworkError: duplicate framework name, also {others}"
                    )
                )
        catalog._disable_broken_dependencies()
        return catalog

    def _disable_broken_dependencies(self) -> None:
        """Move frameworks with a missing dependency or a cycle to :attr:`failures`."""
        broken: dict[str, str] = {}
        for name in self.frameworks:
            for dependency in self._depends(name):
                if dependency not in self.frameworks:
                    why = (
                        "is disabled"
                        if any(f.name == dependency for f in self.failures)
                        else "is not installed"
                    )
                    broken[name] = f"depends on framework {dependency!r}, which {why}"
        for cycle in self._cycles():
            text = " -> ".join([*cycle, cycle[0]])
            for name in cycle:
                broken.setdefault(name, f"framework dependency cycle: {text}")
        # Whatever depends on a disabled framework cannot open either.
        changed = True
        while changed:
            changed = False
            for name in self.frameworks:
                if name in broken:
                    continue
                bad = [d for d in self._depends(name) if d in broken]
                if bad:
                    broken[name] = f"depends on framework {bad[0]!r}, which is disabled"
                    changed = True
        for name, reason in broken.items():
            self.failures.append(_failure(name, self.locations[name], f"FrameworkError: {reason}"))
            del self.frameworks[name]

    def _depends(self, name: str) -> tuple[str, ...]:
        """What ``name`` depends on, as far as a broken dependency or a cycle can be.

        A built-in framework not yet imported counts as depending on nothing:
        it depends on other built-in ones only, which are always installed
        and (tested) form no cycle, so importing it could change no answer.
        """
        framework = self.frameworks.loaded(name)
        return () if framework is None else framework.depends

    def _cycles(self) -> list[list[str]]:
        """Every dependency cycle among the installed frameworks, each listed once."""
        cycles: list[list[str]] = []
        seen: set[frozenset[str]] = set()
        done: set[str] = set()

        def visit(name: str, path: list[str]) -> None:
            if name in path:
                cycle = path[path.index(name) :]
                if frozenset(cycle) not in seen:
                    seen.add(frozenset(cycle))
                    cycles.append(cycle)
                return
            if name in done or name not in self.frameworks:
                return
            path.append(name)
            for dependency in self._depends(name):
                visit(dependency, path)
            path.pop()
            done.add(name)

        for name in list(self.frameworks):
            visit(name, [])
        return cycles

    def check_names(self, space: ParamSpace) -> None:
        """Refuse parameter values naming frameworks or components that are not installed.

        Also warns about drop-in directories that do not exist.
        """
        from ._core_params import check_installed_names, warn_missing_directories

        warn_missing_directories(space)
        check_installed_names(
            space,
            self.frameworks,
            self.disabled(),
            self.entry_points,
        )

    def disabled(self) -> list[str]:
        """Framework names nothing answers to (a name clash leaves the built-in one working)."""
        return [failure.name for failure in self.failures if failure.clash is None]

    def _add(self, framework: Framework, location: str) -> None:
        self.frameworks[framework.name] = framework
        self.locations[framework.name] = location

    def get(self, name: str, *, needed_by: str | None = None) -> Framework:
        try:
            return self.frameworks[name]
        except KeyError:
            pass
        who = f" (needed by framework {needed_by!r})" if needed_by else ""
        failed = [str(f) for f in self.failures if f.name == name]
        if failed:
            raise FrameworkError(
                f"framework {name!r}{who} is disabled: " + "; ".join(failed)
            ) from None
        installed = ", ".join(self.frameworks) or "(none)"
        raise FrameworkError(
            f"unknown framework {name!r}{who}; installed frameworks: {installed}"
        ) from None

    def dependency_order(self, names: list[str]) -> list[str]:
        """``names`` and their dependencies, each after what it depends on."""
        ordered: list[str] = []
        visiting: list[str] = []

        def visit(name: str, needed_by: str | None) -> None:
            if name in ordered:
                return
            if name in visiting:
                cycle = " -> ".join([*visiting[visiting.index(name) :], name])
                raise FrameworkError(f"framework dependency cycle: {cycle}")
            visiting.append(name)
            for dependency in self.get(name, needed_by=needed_by).depends:
                visit(dependency, name)
            visiting.pop()
            ordered.append(name)

        for name in names:
            visit(name, None)
        return ordered
