"""The installed frameworks: pmca's own plus those of ``pmca.frameworks``."""

from __future__ import annotations

import importlib

from attrs import define, field, frozen

from ..mca._discovery import EntryPointIndex
from ..mca._errors import FrameworkError
from ..mca._framework import Framework

#: pmca's own frameworks, ``module:attribute`` of their declaration.
BUILTIN_FRAMEWORKS: tuple[str, ...] = (
    "pmca.patcher._framework:FRAMEWORK",
    "pmca.memory._framework:FRAMEWORK",
    "pmca.rcache._framework:FRAMEWORK",
    "pmca.btl._framework:FRAMEWORK",
)


@frozen
class FrameworkFailure:
    """A third-party framework that could not be loaded."""

    name: str
    location: str
    reason: str

    def __str__(self) -> str:
        return f"framework {self.name} from {self.location}: {self.reason}"


def _load_target(target: str) -> object:
    module_name, _, attribute = target.partition(":")
    return getattr(importlib.import_module(module_name), attribute)


@define
class Catalog:
    """Frameworks by name, in discovery order, and the ones that failed."""

    entry_points: EntryPointIndex = field(factory=lambda: EntryPointIndex(()))
    frameworks: dict[str, Framework] = field(factory=dict)
    failures: list[FrameworkFailure] = field(factory=list)
    locations: dict[str, str] = field(factory=dict)

    @classmethod
    def discover(cls) -> Catalog:
        catalog = cls(EntryPointIndex.scan())
        for target in BUILTIN_FRAMEWORKS:
            framework = _load_target(target)
            assert isinstance(framework, Framework)
            catalog._add(framework, f"built-in ({target})")
        for entry_point in catalog.entry_points.group("pmca.frameworks"):
            location = f"entry point pmca.frameworks:{entry_point.name} = {entry_point.value}"
            try:
                framework = entry_point.load()
                if not isinstance(framework, Framework):
                    raise FrameworkError(f"{framework!r} is not a pmca.Framework")
                if framework.name != entry_point.name:
                    raise FrameworkError(
                        f"declares name {framework.name!r}, entry point says {entry_point.name!r}"
                    )
                if framework.name in catalog.frameworks:
                    raise FrameworkError(
                        f"name already taken by {catalog.locations[framework.name]}"
                    )
            except Exception as exc:
                catalog.failures.append(
                    FrameworkFailure(entry_point.name, location, f"{type(exc).__name__}: {exc}")
                )
                continue
            catalog._add(framework, location)
        return catalog

    def _add(self, framework: Framework, location: str) -> None:
        self.frameworks[framework.name] = framework
        self.locations[framework.name] = location

    def get(self, name: str) -> Framework:
        try:
            return self.frameworks[name]
        except KeyError:
            installed = ", ".join(self.frameworks) or "(none)"
            raise FrameworkError(
                f"unknown framework {name!r}; installed frameworks: {installed}"
            ) from None

    def dependency_order(self, names: list[str]) -> list[str]:
        """``names`` and their dependencies, each after what it depends on."""
        ordered: list[str] = []
        visiting: list[str] = []

        def visit(name: str) -> None:
            if name in ordered:
                return
            if name in visiting:
                cycle = " -> ".join([*visiting[visiting.index(name) :], name])
                raise FrameworkError(f"framework dependency cycle: {cycle}")
            visiting.append(name)
            for dependency in self.get(name).depends:
                visit(dependency)
            visiting.pop()
            ordered.append(name)

        for name in names:
            visit(name)
        return ordered
