"""How a framework is declared, and the hooks for its base logic."""

from __future__ import annotations

import importlib
from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING, Literal

from attrs import field, frozen

from .._public import public
from .._records import FrozenValue, Record
from ._errors import FrameworkError
from ._names import Version, check_component_name, check_framework_name

if TYPE_CHECKING:
    from ._context import FrameworkParams
    from ._open import OpenFramework


Policy = Literal["single", "multi"]


@public
@frozen(eq=False, repr=False)
class ComponentRef(FrozenValue):
    """A built-in component in a framework's static table, not yet imported.

    :param target: ``"package.module:attribute"`` naming the component class
        or instance.
    :param force_static: the component always loads statically; saying so
        here lets pmca decide before importing it (Open MPI decides at build
        time), so a dso run never re-imports it.
    """

    name: str = field(validator=lambda _i, _a, v: check_component_name(v))
    target: str
    force_static: bool = False

    @property
    def module(self) -> str:
        return self.target.partition(":")[0]


@public
@frozen(eq=False, repr=False)
class Alias(FrozenValue):
    """Another name for a component (Open MPI's ``vader`` for ``sm``)."""

    target: str
    deprecated: bool = False


def _framework_name(_instance: object, _attribute: object, value: str) -> None:
    check_framework_name(value)


def _api_version(value: object) -> Version:
    return Version.parse(value, what="API version")


def _component_refs(value: Iterable[ComponentRef]) -> tuple[ComponentRef, ...]:
    return tuple(value)


def _names(value: Iterable[str]) -> tuple[str, ...]:
    return tuple(value)


def _to_aliases(value: Mapping[str, str | Alias]) -> Mapping[str, Alias]:
    return {k: v if isinstance(v, Alias) else Alias(v) for k, v in value.items()}


@public
class FrameworkBase:
    """A framework's base logic, instantiated once per framework open.

    All of its state lives on the instance, which pmca drops at the last
    close: nothing a framework base remembers can outlive the components it
    pointed at (Open MPI's ``opal_patcher`` global did, and crashed).

    :attr:`framework` is the open framework: ``self.framework.modules()``
    (the selected modules, best first), ``self.framework.module()`` and
    ``self.framework.hook()`` (the framework's hooks, called in selection
    order), the same calls as on ``Session.framework(name)``.
    """

    def __init__(self, framework: OpenFramework) -> None:
        #: The open framework: its selected modules, components and parameters.
        self.framework = framework

    def register_params(self, params: FrameworkParams) -> None:
        """Register ``<framework>_base_*`` parameters beyond the standard ones."""

    def opened(self) -> None:
        """Run after selection, with :attr:`~pmca.FrameworkBase.framework` fully populated."""

    def closing(self) -> None:
        """Run at the last close, before any component is closed."""

    def peer_opened(self, peer: OpenFramework) -> None:
        """Another framework opened while this one is open (or was open before it)."""


@public
@frozen(eq=False, repr=False)
class Framework(Record):
    """A named kind of plugin with one interface.

    :param name: ``[a-z][a-z0-9]*``.
    :param api_version: the interface version; components must match its
        major version.
    :param interface: a class of pluggy hook specifications for the
        framework's own hooks, beyond the lifecycle. They are called on the
        selected components in selection order, highest priority first
        (``firstresult`` hooks answer for the best component); see
        :data:`pmca.hookspec`.
    :param policy: ``single`` keeps the highest-priority module, ``multi``
        keeps every available one ordered by priority.
    :param depends: frameworks opened before this one and closed after it.
    :param allow_dso: ``False`` forces every component of this framework to
        load statically.
    :param static_components: the built-in components.
    :param aliases: alternative component names accepted in the selection
        parameter.
    :param base: the framework's base logic (see :class:`FrameworkBase`), or
        ``"module:attribute"`` naming it: imported at the first open, so that
        sessions that never open the framework do not import what its base needs.
    """

    name: str = field(validator=_framework_name)
    description: str
    api_version: Version = field(converter=_api_version)
    interface: type | None = None
    policy: Policy = field(default="single")
    depends: tuple[str, ...] = field(default=(), converter=_names)
    allow_dso: bool = True
    static_components: tuple[ComponentRef, ...] = field(default=(), converter=_component_refs)
    aliases: Mapping[str, Alias] = field(factory=dict, converter=_to_aliases)
    base: type[FrameworkBase] | str = FrameworkBase

    @policy.validator
    def _check_policy(self, _attribute: object, value: object) -> None:
        if value not in ("single", "multi"):
            raise ValueError(f"framework {self.name!r}: policy must be 'single' or 'multi'")

    def base_class(self) -> type[FrameworkBase]:
        """:attr:`base`, imported if it is named by a string."""
        if not isinstance(self.base, str):
            return self.base
        module, _, attribute = self.base.partition(":")
        try:
            base = getattr(importlib.import_module(module), attribute)
        except (ImportError, AttributeError) as exc:
            raise FrameworkError(
                f"framework {self.name!r}: cannot import its base {self.base!r}: {exc}"
            ) from exc
        if not (isinstance(base, type) and issubclass(base, FrameworkBase)):
            raise FrameworkError(
                f"framework {self.name!r}: base {self.base!r} is not a FrameworkBase subclass"
            )
        return base

    def __repr__(self) -> str:
        return f"<Framework {self.name} API {self.api_version} ({self.policy})>"
