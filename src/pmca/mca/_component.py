"""The component base class and what its hooks exchange with pmca."""

from __future__ import annotations

from typing import Any, ClassVar

from attrs import frozen

from .._public import public
from .._records import FrozenValue
from ._errors import ComponentError
from ._names import Version, check_component_name, check_framework_name


@public
@frozen(eq=False, repr=False)
class Query(FrozenValue):
    """What a component's ``query`` hook returns when it wants to be selected.

    :param priority: higher wins; ``single`` frameworks keep only the best.
    :param module: the framework's working interface, handed to users by
        :meth:`pmca.Session.modules`.
    """

    priority: int
    module: object


@public
class Component:
    """Base class of every pmca component.

    Subclasses set the class attributes and implement lifecycle hooks with
    :data:`pmca.hookimpl`. Instances are registered with pluggy, so equality
    stays identity-based (never turn a component into an ``eq=True`` attrs
    class).
    """

    #: The framework this component plugs into.
    framework: ClassVar[str]
    #: The component name, matched against the framework selection parameter.
    name: ClassVar[str]
    #: The component's own version.
    version: ClassVar[str] = "0.0.0"
    #: The framework API version the component was written for.
    api_version: ClassVar[str] = "1.0.0"
    #: Always load statically, whatever ``mca_base_component_dso`` says
    #: (Open MPI's forced-static components, such as memory/patcher).
    force_static: ClassVar[bool] = False
    #: The component needs memory registration, so selecting it activates the
    #: memory hooks in the "runtime" cell of the leave_pinned matrix.
    needs_registration: ClassVar[bool] = False

    def __repr__(self) -> str:
        return f"<{type(self).__name__} {self.framework}/{self.name} {self.version}>"


def make_component(obj: object, *, expected_framework: str, expected_name: str) -> Component:
    """Turn what an entry point or a static table points at into a component.

    ``obj`` may be a :class:`Component` subclass (instantiated with no
    arguments) or an instance. Anything else, or a component whose framework,
    name or versions do not match where it was found, is rejected with the
    reason.
    """
    if isinstance(obj, type) and issubclass(obj, Component):
        try:
            component: Component = obj()
        except Exception as exc:
            raise ComponentError(f"{obj.__qualname__}() failed: {exc!r}") from exc
    elif isinstance(obj, Component):
        component = obj
    else:
        raise ComponentError(
            f"{obj!r} is not a pmca component (expected a pmca.Component subclass or instance)"
        )
    framework = getattr(component, "framework", None)
    name = getattr(component, "name", None)
    check_framework_name(framework)
    check_component_name(name)
    if framework != expected_framework:
        raise ComponentError(
            f"component {name!r} declares framework {framework!r} "
            f"but was found as a {expected_framework!r} component"
        )
    if name != expected_name:
        raise ComponentError(f"component declares name {name!r} but was found as {expected_name!r}")
    Version.parse(component.version, what=f"version of component {name!r}")
    Version.parse(component.api_version, what=f"api_version of component {name!r}")
    return component


def check_api(component: Component, framework: str, api_version: Version) -> None:
    """Reject a component written for an API this framework does not provide.

    ``framework`` and ``api_version`` are the framework's name and API version.
    The rule: the same major version, and a minor version no newer than the
    framework's (a newer minor may call hooks this framework does not have);
    the patch level is not compared.
    """
    wanted = Version.parse(component.api_version)
    mismatch = (
        f"component {component.framework}/{component.name} was written for "
        f"{framework} API {wanted}, but this framework implements API {api_version}"
    )
    if wanted.major != api_version.major:
        raise ComponentError(f"{mismatch} (major versions must match)")
    if wanted.minor > api_version.minor:
        raise ComponentError(
            f"{mismatch} (a component needs the same major version and a minor version "
            f"no newer than the framework's: {api_version.major}.{api_version.minor} at most)"
        )


def describe(obj: Any) -> str:
    """A short description of a hook owner for messages."""
    if isinstance(obj, Component):
        return f"{obj.framework}/{obj.name}"
    return repr(obj)
