"""btl/tcp: sockets on the interfaces ``btl_tcp_if_include``/``btl_tcp_if_exclude`` choose."""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..._lazy import lazy_attributes
from ..._version import __version__
from ...mca import Component, ComponentContext, ComponentParams, NotAvailable, Query, hookimpl
from ...mca.params import one_of, within
from .._limits import Flags, Limits
from ..base import MAX_INT32, read_limits, register_limits
from ..base._pvars import LANE_COUNTERS, Counter, declare_counters

if TYPE_CHECKING:
    from collections.abc import Callable

    from structlog.typing import FilteringBoundLogger

    from ._interfaces import Interface
    from ._module import TcpModule

DEFAULTS = Limits(
    exclusivity=100,  # MCA_BTL_EXCLUSIVITY_LOW
    latency=100,
    bandwidth=10_000,
    # Eager up to 4 MiB: the receiver streams a matched message straight into the
    # posted buffer, so only an unexpected one is staged, and no round trip is paid.
    eager_limit=4 * 1024 * 1024,
    rndv_eager_limit=64 * 1024,
    max_send_size=4 * 1024 * 1024,
    flags=Flags.SEND | Flags.SEND_INPLACE | Flags.RDMA,
    put_limit=(1 << 32) - 64,
    get_limit=1 << 62,
)


#: btl_tcp_send_queue_limit's default: a few hundred messages of a few KiB, or
#: a thousand tiny ones, per peer on top of what the kernel buffers.
SEND_QUEUE_LIMIT = 1 << 20

#: btl_tcp_recv_queue_limit's default (its help says why): four messages of
#: the default eager limit per peer.
RECV_QUEUE_LIMIT = 16 << 20


def _items(value: object) -> list[str]:
    return [item.strip() for item in str(value or "").split(",") if item.strip()]


#: Large active messages (above the placement head) by where they were received.
STREAM_COUNTERS: tuple[Counter, ...] = (
    (
        "streams_placed",
        "messages",
        "Large messages from the peer received in place, where their receiver named",
    ),
    (
        "streams_staged",
        "messages",
        "Large messages from the peer received into a buffer of their own, then delivered",
    ),
    (
        "native_bytes_received",
        "bytes",
        "Bytes of large bodies from the peer (large messages, get and put data) read into "
        "their destination by one native call per piece, without the GIL",
    ),
    (
        "native_bytes_sent",
        "bytes",
        "Bytes of large bodies to the peer written from where they lie by one native call "
        "per piece, without the GIL",
    ),
)


class TcpComponent(Component):
    framework = "btl"
    name = "tcp"
    version = __version__
    api_version = "1.0.0"

    def __init__(self) -> None:
        self._interfaces: tuple[Interface, ...] = ()
        self._per_interface: dict[str, list[tuple[str, int]]] = {}
        self._report_log: FilteringBoundLogger | None = None

    @hookimpl
    def register(self, params: ComponentParams) -> None:
        register_limits(params, DEFAULTS)
        declare_counters("tcp", STREAM_COUNTERS + LANE_COUNTERS)
        params.register(
            "if_include",
            type=str,
            default="",
            level=1,
            help="Comma-separated interface names or IPv4/IPv6 CIDRs to use (loopback "
            "allowed, and container/VM bridges such as docker0 and virbr0, which are left "
            "out by default); mutually exclusive with btl_tcp_if_exclude",
        )
        params.register(
            "if_exclude",
            type=str,
            default="",
            level=1,
            help="Comma-separated interface names or IPv4/IPv6 CIDRs not to use; mutually "
            "exclusive with btl_tcp_if_include",
        )
        for name, what in _PER_INTERFACE:
            params.register(
                f"if_{name}",
                type=str,
                default="",
                level=5,
                help=f"Comma-separated NAME:VALUE items: the {what} of the rail on the "
                "interface NAME (a name or an IPv4/IPv6 CIDR), overriding "
                f"btl_tcp_{name}"
                + (" and the speed the kernel reports" if name == "bandwidth" else ""),
            )
        params.register(
            "zerocopy",
            type=str,
            default="auto",
            level=5,
            help="Send large bodies with MSG_ZEROCOPY: 'true', 'false', or 'auto' (only on "
            "non-loopback connections, where the kernel does not copy anyway)",
            **one_of("true", "false", "auto"),
        )
        params.register(
            "zerocopy_threshold",
            type="size",
            default=256 * 1024,
            level=6,
            help="Smallest body sent with MSG_ZEROCOPY",
            **within(0, MAX_INT32, "bytes"),
        )
        params.register(
            "bulk_chunk",
            type="size",
            default=0,
            level=5,
            help="Pacing of large bodies: written at most this many bytes per system call "
            "and, on loopback, read once this many bytes (or the rest) are waiting; 0 (the "
            "default) writes and reads whatever the socket takes (else at least 1 KiB: one "
            "system call per byte would crawl)",
            **within(1024, MAX_INT32, "bytes", or_zero=True),
        )
        params.register(
            "send_queue_limit",
            type="size",
            default=SEND_QUEUE_LIMIT,
            level=5,
            help="Bytes of sends to one peer that btl/tcp copies and holds while the peer's "
            "socket takes no more (each message counts its size plus 1 KiB of "
            "bookkeeping). A send that does not fit is not copied: a blocking send waits, "
            "progressing, and an isend's request stays pending until the socket takes its "
            "bytes, so a peer that stops reading holds its senders back instead of growing "
            "their memory; 0 copies nothing",
            **within(0, MAX_INT32, "bytes"),
        )
        params.register(
            "recv_queue_limit",
            type="size",
            default=RECV_QUEUE_LIMIT,
            level=5,
            help="Bytes of one peer's messages that may wait in this process with no receive "
            "for them (unexpected messages; each counts its size plus 512 bytes) before "
            "btl/tcp stops reading that peer's socket: the kernel's buffers fill, then the "
            "sender's btl_tcp_send_queue_limit holds its sends back, and nothing is dropped. "
            "Reading starts again once receives take the peer's messages down to half of "
            "this, or as soon as this process waits for something from the peer (a receive "
            "posted, a probe, a rendezvous answer, finalize): what it waits for may be behind "
            "them, so the bound is passed while it waits. A message being received completes "
            "first: one message (btl_tcp_eager_limit) may go above it. The default, 16 MiB, "
            "is four messages of the default eager limit, over 10 ms of a 10 Gbit/s link; at "
            "two ranks per core on a node with 4 GiB per core (2 GiB per rank), 32 peers "
            "flooding one rank at once fill 512 MiB of it, a quarter. 0: no bound",
            **within(64 * 1024, 1 << 40, "bytes", or_zero=True),
        )
        params.register(
            "hello_timeout",
            type=float,
            default=1.0,
            level=5,
            help="Seconds an accepted connection has to send its whole hello (the "
            "connecting rank and the nonce of this process's modex entry) before it is "
            "dropped; connections are read side by side, so one that sends nothing delays "
            "no rank (more than 0, at most 600)",
            **within(0, 600, "s", above=True),
        )
        params.register(
            "half_open_max",
            type=int,
            default=64,
            level=6,
            help="Connections a listener keeps while they have not sent their whole hello; "
            "at this many, the oldest is dropped to make room for a new one",
            **within(1, 65536, "connections"),
        )
        for name, default, (least, most), unit, what in _KEEPALIVE:
            params.register(
                name, type=int, default=default, level=5, help=what, **within(least, most, unit)
            )

    @hookimpl
    def open(self, ctx: ComponentContext) -> None:
        # Imported here (socket, ipaddress): a session of one rank may never open tcp.
        from ._interfaces import per_interface, select_interfaces

        params = ctx.params
        chosen, dropped = select_interfaces(
            _items(params["if_include"]), _items(params["if_exclude"])
        )
        if not chosen:
            raise NotAvailable(
                "no interface left after btl_tcp_if_include/btl_tcp_if_exclude"
                + (f" ({'; '.join(dropped)})" if dropped else "")
            )
        self._interfaces = tuple(chosen)
        self._per_interface = {
            name: per_interface(_items(params[f"if_{name}"]), f"btl_tcp_if_{name}")
            for name, _ in _PER_INTERFACE
        }
        self._report_log = choices_logger(ctx)
        if _reporting(ctx):  # the report lists the interfaces again: only when shown
            self._report_log.info(
                "interfaces",
                verdicts=[
                    f"{what}: {verdict}" for what, verdict in interface_report(params.__getitem__)
                ],
            )

    @hookimpl
    def query(self, ctx: ComponentContext) -> Query:
        from attrs import evolve

        from ..base import leave_pinned_wanted
        from ._group import RailGroup
        from ._interfaces import rail_bandwidth, rail_latency
        from ._listener import HelloRules
        from ._module import TcpModule, TcpSettings

        params = ctx.params
        keepalive = tuple(int(params[name]) for name, *_ in _KEEPALIVE)
        zerocopy = str(params["zerocopy"]).lower()
        leave_pinned, why = leave_pinned_wanted(ctx.host.params)
        if leave_pinned:
            # Registrations stay cached in grdma (Open MPI's btl opens rcache too).
            try:
                ctx.open_framework("rcache")
            except Exception as exc:
                leave_pinned, why = False, f"the rcache framework did not open: {exc}"
        ctx.log.debug("registration", leave_pinned=leave_pinned, why=why)
        settings = TcpSettings(
            interfaces=self._interfaces,
            zerocopy=zerocopy,
            zerocopy_threshold=int(params["zerocopy_threshold"]),
            connect_timeout=float(ctx.host.params.value("pmca_base_modex_timeout")),
            bulk_chunk=int(params["bulk_chunk"]),
            keepalive=keepalive if keepalive[0] else None,
            leave_pinned=leave_pinned,
            send_queue_limit=int(params["send_queue_limit"]),
            recv_queue_limit=int(params["recv_queue_limit"]),
            hello=HelloRules(float(params["hello_timeout"]), int(params["half_open_max"])),
        )
        limits = read_limits(params, DEFAULTS)
        # One module (a rail) per interface, weighed by the link's speed where the
        # kernel reports it (else btl_tcp_bandwidth): the bml stripes across them.
        rails: list[TcpModule] = []
        # Counted by link, not by address: an interface's IPv4 and IPv6 addresses
        # are two rails over one link, and striping over them gains nothing.
        networks = len({i.name for i in self._interfaces if not i.loopback})
        for interface in self._interfaces:
            rail_limits = evolve(
                limits,
                bandwidth=rail_bandwidth(interface, limits, self._per_interface["bandwidth"])[0],
                latency=rail_latency(interface, limits, self._per_interface["latency"])[0],
            )
            if networks > 1 and not interface.loopback:
                # Several rails: a message above the rendezvous limit goes as a
                # get, striped over every rail, instead of eagerly over one.
                eager = min(limits.eager_limit, limits.rndv_eager_limit)
                rail_limits = evolve(rail_limits, eager_limit=eager)
            log = ctx.log.bind(rail=interface.name)
            group = rails[0].group if rails else RailGroup(self._report_log or log)
            try:
                rails.append(TcpModule(rail_limits, settings, log, interface, group))
            except BaseException:
                for rail in rails:  # never used: their listeners would stay open
                    rail.close_listener()
                raise
        rails[0].rails = tuple(rails[1:])
        return Query(priority=limits.exclusivity, module=rails[0])


#: Verbosity (Open MPI's 0-100 scale) at which a message is shown as info.
_INFO = 40


def _reporting(ctx: ComponentContext) -> bool:
    """Whether :func:`choices_logger` shows its messages now (``btl_base_verbose`` 1 up)."""
    return int(ctx.host.params.value("btl_base_verbose")) >= 1


def choices_logger(ctx: ComponentContext) -> FilteringBoundLogger:
    """btl/tcp's logger for its interface and rail choices: shown from
    ``btl_base_verbose`` 1 up (as Open MPI's btl/tcp reports them), not only at 40."""
    from ...mca._logging import framework_logger

    space = ctx.host.params
    verbose = space.get("btl_base_verbose")

    def verbosity() -> int:
        level = int(verbose.value)
        return _INFO if level >= 1 else level

    destination = str(space.value("mca_base_verbose"))
    return framework_logger("btl", verbosity, destination).bind(component="tcp")


def interface_report(value: Callable[[str], object]) -> list[tuple[str, str]]:
    """Every interface with an address and what btl/tcp does with it (chosen, with its
    bandwidth and latency and where they come from, or left out and why), given
    ``value(name)`` of the ``btl_tcp_<name>`` parameters. ``pmca info --tcp-interfaces``."""
    from attrs import evolve

    from ._interfaces import per_interface, report

    entries = {
        name: per_interface(_items(value(f"if_{name}")), f"btl_tcp_if_{name}")
        for name, _ in _PER_INTERFACE
    }
    limits = evolve(
        DEFAULTS, bandwidth=int(str(value("bandwidth"))), latency=int(str(value("latency")))
    )
    return report(
        _items(value("if_include")),
        _items(value("if_exclude")),
        entries["bandwidth"],
        entries["latency"],
        limits,
    )


#: Per-interface overrides of a rail's limits: ``btl_tcp_if_<name>``, what it sets.
_PER_INTERFACE = (("bandwidth", "bandwidth in Mbit/s"), ("latency", "latency"))


#: TCP keepalive, as UCX sets it on its tcp connections (``UCX_TCP_KEEP*``):
#: name, default, the kernel's range, unit, help.
_KEEPALIVE = (
    (
        "keepalive_time",
        10,
        (0, 32767),
        "seconds",
        "Seconds a connection may stay silent before the kernel probes its peer (TCP "
        "keepalive): a receive waiting on a host that died fails with PeerFailed after "
        "time + interval * probes seconds instead of waiting forever; 0 turns it off",
    ),
    ("keepalive_interval", 2, (1, 32767), "seconds", "Seconds between unanswered probes"),
    ("keepalive_probes", 3, (1, 127), "probes", "Unanswered probes that fail the connection"),
)


if not TYPE_CHECKING:  # the module class, imported at first use
    __getattr__, __dir__ = lazy_attributes(__name__, {"TcpModule": "._module:TcpModule"})


__all__ = ["TcpComponent", "TcpModule", "interface_report"]
