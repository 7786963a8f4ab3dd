"""The btl framework's base logic: finalize every module at the last close."""

from __future__ import annotations

from ..._public import public
from ...mca._context import FrameworkParams
from ...mca._framework import FrameworkBase
from ...mca.params import MAX_TIMEOUT, within

TYPE_CHECKING = False  # typing.TYPE_CHECKING, without importing typing for it
if TYPE_CHECKING:
    from .._interface import BtlModule


@public
class BtlBase(FrameworkBase):
    """Runs each module's ``finalize`` before the components close (``mca_btl_base_close``).

    A module whose finalize raises is reported like any failing component
    and the others still finalize.
    """

    def register_params(self, params: FrameworkParams) -> None:
        params.register(
            "wait_spin",
            type=float,
            default=0.05,
            level=5,
            settable=True,
            help="Seconds a blocking p2p wait keeps polling the btls before it sleeps on "
            "their file descriptors (Open MPI's ranks poll forever: lowest latency, one "
            "busy core per waiting rank; 0 sleeps at once, for oversubscribed hosts)",
            **within(0, MAX_TIMEOUT, "s"),
        )
        from ...mca.params import AUTO_BOOL

        # Open MPI's name (an mpi_* parameter, like mpi_leave_pinned).
        self.framework.host.params.register(
            "mpi",
            None,
            "yield_when_idle",
            type=int,
            enumeration=AUTO_BOOL,
            default=-1,
            level=9,
            group="btl_base",
            settable=True,
            help="Whether a blocking p2p wait yields the processor between polls: always "
            "(true), never (false), or when this host runs more ranks than it has cores "
            "(auto)",
        )

    def opened(self) -> None:
        # The module interface, imported with the first open rather than with the
        # framework's registration (``pmca info`` needs none of it), and not later:
        # finalize may run when this process has no file descriptor left.
        from .. import _interface  # noqa: F401

    def modules(self) -> list[BtlModule]:
        """The selected modules, each followed by its further rails (a module per
        interface, as btl/tcp makes: ``module.rails``), so the bml stripes over them."""
        from .._interface import BtlModule

        found: list[BtlModule] = []
        for module in self.framework.modules():
            if isinstance(module, BtlModule):
                found.append(module)
                found.extend(r for r in getattr(module, "rails", ()) if isinstance(r, BtlModule))
        return found

    def closing(self) -> None:
        queried = [loaded for loaded in self.framework.loaded if loaded.module is not None]
        if not queried:  # registered only, or selection deferred and never made
            return
        from .._interface import BtlModule  # imported by opened(): no file to read now

        for loaded in queried:
            module = loaded.module
            if not isinstance(module, BtlModule):
                continue
            try:
                module.finalize()
            except Exception as exc:
                from ...mca._failures import ComponentFailure  # built only when one fails

                self.framework.failures.append(
                    ComponentFailure.capture(
                        framework=self.framework.name,
                        component=loaded.component.name,
                        hook="finalize",
                        location=loaded.candidate.location,
                        distribution=loaded.candidate.distribution,
                        error=exc,
                    )
                )
                self.framework.log.error(
                    "module finalize failed", component=loaded.component.name, error=repr(exc)
                )
