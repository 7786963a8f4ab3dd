"""Hook specifications every component may implement.

These are the four lifecycle hooks of Open MPI's ``mca_base_component_t``:
``register`` (declare parameters only), ``open``, ``query`` and ``close``.
pmca calls them one component at a time, never as a broadcast, so that one
component's failure is isolated from the others.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ._markers import hookspec

if TYPE_CHECKING:
    from ._component import Query
    from ._context import ComponentContext, ComponentParams


class ComponentLifecycle:
    """The lifecycle hooks, in the order pmca calls them."""

    @hookspec
    def register(self, params: ComponentParams) -> None:
        """Declare the component's parameters, and nothing else.

        This may be the only hook ever called on a component (``pmca info``
        registers components it never opens), so it must not allocate
        resources or start anything.

        :param params: the component's parameter group; names given to
            ``params.register`` are prefixed with ``<framework>_<component>_``.
        """

    @hookspec
    def open(self, ctx: ComponentContext) -> bool | None:
        """Prepare the component for use.

        Return ``False`` or raise :class:`pmca.NotAvailable` when the component
        cannot work here (missing hardware, library, platform); it is then
        dropped silently. Any other exception is reported and isolates the
        component.
        """

    @hookspec
    def query(self, ctx: ComponentContext) -> Query | None:
        """Offer a module for selection.

        Return :class:`pmca.Query` with a priority and the module, or ``None``
        to decline. ``single`` frameworks keep the highest priority only.
        """

    @hookspec
    def close(self, ctx: ComponentContext) -> None:
        """Release everything ``open`` and ``query`` acquired.

        Called after the framework's base logic has finished with the module.
        Frameworks this component opened through ``ctx.open_framework`` and
        did not close are closed for it afterwards, in reverse order.
        """
