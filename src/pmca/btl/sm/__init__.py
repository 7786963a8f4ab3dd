"""btl/sm: shared memory between the processes of one host.

memfd segments (nothing in /dev/shm, nothing left after any exit), one
lock-free receive FIFO per process, single-copy put/get with
``process_vm_readv``/``writev`` (CMA) and copy-in/copy-out through the
segment where CMA is refused.  Open MPI's ``vader`` name is an alias.
The transport is this component's own native library, loaded through
pmca's loader: in ``dso`` mode it is really unloaded at the last close,
after every segment is unmapped and every descriptor closed.
"""

from __future__ import annotations

import os
import sys
from typing import TYPE_CHECKING, Any

from ..._lazy import lazy_attributes
from ..._version import __version__
from ...mca import Component, ComponentContext, ComponentParams, NotAvailable, Query, hookimpl
from ...mca.params import Enumeration, Param, power_of_two, within
from ..base import check_committed, read_limits, register_limits
from ..base._pvars import LANE_COUNTERS, declare_counters
from ._defaults import DEFAULTS, LIBRARY_NAME, MECHANISMS, library_path

if TYPE_CHECKING:
    from ._module import SmModule
    from ._transport import Transport, TransportConfig

#: The largest receive FIFO (entries of 16 bytes: 16 MiB) and send pools: every
#: process maps and touches its whole segment at init, so these are committed.
MAX_FIFO = 1 << 20
MAX_FRAGMENTS = 1 << 16
MAX_SEGMENT = 1 << 30

SINGLE_COPY = Enumeration("sm_single_copy", tuple((name, i) for i, name in enumerate(MECHANISMS)))
ATTACH = Enumeration("sm_attach", (("pidfd", 0), ("proc", 1)))


class _VaderSynonyms(ComponentParams):
    """Registers each ``btl_sm_X`` with Open MPI's deprecated synonym ``btl_vader_X``."""

    def __init__(self, params: ComponentParams) -> None:
        super().__init__(params._space, params.framework, params.component)

    def register(self, name: str, **options: Any) -> Param:
        options.setdefault("deprecated_synonyms", (f"{self.framework}_vader_{name}",))
        return super().register(name, **options)


class SmComponent(Component):
    framework = "btl"
    name = "sm"
    version = __version__
    api_version = "1.0.0"

    @hookimpl
    def register(self, params: ComponentParams) -> None:
        params = _VaderSynonyms(params)
        register_limits(params, DEFAULTS, max_size=MAX_SEGMENT)
        declare_counters("sm", LANE_COUNTERS)
        params.register(
            "single_copy_mechanism",
            type=int,
            enumeration=SINGLE_COPY,
            default=1,
            level=3,
            help="Single-copy mechanism for put/get: cma (process_vm_readv/writev; emulated "
            "where the kernel refuses it), emulated (the memory's owner copies it through "
            "the shared segments) or none (no put/get: large messages are pipelined "
            "through the segments by the message layer)",
        )
        params.register(
            "attach",
            type=int,
            enumeration=ATTACH,
            default=0,
            level=9,
            help="How peers' segments are opened: pidfd (pidfd_getfd, then /proc as a "
            "fallback) or proc (/proc/<pid>/fd/<n> only)",
        )
        params.register(
            "fifo_size",
            type=int,
            default=1024,
            level=6,
            help="Entries in each process's receive FIFO (a power of two, 16 bytes each, "
            f"committed up front: at most {MAX_FIFO})",
            **power_of_two(2, MAX_FIFO),
        )
        params.register(
            "eager_fragments",
            type=int,
            default=64,
            level=6,
            help="Fragments of eager_limit bytes each process owns for sending",
            **within(1, MAX_FRAGMENTS),
        )
        params.register(
            "max_fragments",
            type=int,
            default=32,
            level=6,
            help="Fragments of max_send_size bytes each process owns for sending",
            **within(1, MAX_FRAGMENTS),
        )
        # Each process commits its whole segment at init: bound it.
        check_committed(
            params,
            (("eager_limit", "eager_fragments", 64), ("max_send_size", "max_fragments", 64)),
            MAX_SEGMENT,
            "each process's shared-memory segment",
        )

    @hookimpl
    def open(self, ctx: ComponentContext) -> None:
        if not sys.platform.startswith("linux"):
            raise NotAvailable(f"btl sm needs Linux (memfd, pidfd, CMA); this is {sys.platform}")
        if not os.path.exists(library_path()):
            raise NotAvailable(f"{LIBRARY_NAME} was not built; build pmca with its C sources")

    @hookimpl
    def query(self, ctx: ComponentContext) -> Query:
        # Imported here: a session of one rank may never query this component.
        from ._module import SmModule
        from ._transport import Transport

        params = ctx.params
        limits = read_limits(params, DEFAULTS)
        config = _config(params, limits.eager_limit, limits.max_send_size)
        holder: list[Transport] = []
        library = ctx.load_library(library_path(), before_unload=lambda: _close_left(holder))
        transport = Transport(library.cdll, config)
        holder.append(transport)
        module = SmModule(
            limits,
            transport,
            ctx.log,
            mechanism=MECHANISMS[int(params["single_copy_mechanism"])],
            allow_getfd=int(params["attach"]) == 0,
        )
        return Query(priority=limits.exclusivity, module=module)


def _config(params: ComponentParams, eager_limit: int, max_send_size: int) -> TransportConfig:
    from ._transport import TransportConfig

    if eager_limit < 1:
        raise ValueError(f"{params.full_name('eager_limit')} must be at least 1")
    return TransportConfig(
        fifo_capacity=int(params["fifo_size"]),
        eager_size=eager_limit,
        eager_count=int(params["eager_fragments"]),
        max_size=max_send_size,
        max_count=int(params["max_fragments"]),
    )


def _close_left(holder: list[Transport]) -> str | None:
    """The loader's unload guard: never unload the library under a live segment."""
    transport = holder.pop() if holder else None
    if transport is None or transport.closed:
        return None
    transport.close()
    return "btl sm unloaded with its segment still mapped: unmapped it first"


if not TYPE_CHECKING:  # the module class, imported at first use
    __getattr__, __dir__ = lazy_attributes(__name__, {"SmModule": "._module:SmModule"})


__all__ = ["SmComponent", "SmModule"]
