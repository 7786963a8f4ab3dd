"""ctypes bindings of libpmca_btl_sm.so: its structures, its entry points
(each with the GIL policy its work needs), and the per-peer counters it keeps.

:class:`Functions` checks the library's ABI and structure sizes when it binds,
so a library left from another pmca version is refused by name instead of
misreading memory.
"""

from __future__ import annotations

import ctypes
import errno
from typing import Any

from ._defaults import LIBRARY_NAME
from ._faults import TransportError

ABI = 2
FRAGMENT_HEADER_BYTES = 64


class Config(ctypes.Structure):
    _fields_ = (
        ("fifo_capacity", ctypes.c_uint32),
        ("eager_size", ctypes.c_uint32),
        ("eager_count", ctypes.c_uint32),
        ("max_size", ctypes.c_uint32),
        ("max_count", ctypes.c_uint32),
    )


class Delivery(ctypes.Structure):
    _fields_ = (
        ("source", ctypes.c_uint32),
        ("tag", ctypes.c_uint32),
        ("length", ctypes.c_uint64),
        ("offset", ctypes.c_uint64),
    )


STAT_NAMES = (
    "sent",
    "received",
    "fifo_full",
    "no_fragment",
    "wakeups",
    "dropped",
    "lane_sent",
    "lane_received",
)


class Stats(ctypes.Structure):
    _fields_ = tuple((name, ctypes.c_uint64) for name in STAT_NAMES)


#: The per-peer counters the C side keeps (sm.h's SM_* order), by pvar name.
COUNTS = (
    "messages_sent",
    "bytes_sent",
    "messages_received",
    "bytes_received",
    "lane_messages_sent",
    "lane_messages_received",
    "rdma_operations",
    "rdma_bytes",
)
COUNT_INDEX = {name: index for index, name in enumerate(COUNTS)}


_u32, _u64, _i32, _i64 = ctypes.c_uint32, ctypes.c_uint64, ctypes.c_int32, ctypes.c_int64
_ptr = ctypes.c_void_p
_int = ctypes.c_int

# name: (restype, argtypes, keeps the GIL)
_PROTOTYPES: dict[str, tuple[Any, tuple[Any, ...], bool]] = {
    "pmca_sm_abi": (_u32, (), True),
    "pmca_sm_config_size": (_u32, (), True),
    "pmca_sm_delivery_size": (_u32, (), True),
    "pmca_sm_fragment_header_size": (_u32, (), True),
    "pmca_sm_create": (_ptr, (_ptr, ctypes.POINTER(_int)), True),
    "pmca_sm_destroy": (None, (_ptr,), True),
    "pmca_sm_bind": (_int, (_ptr, _u32, _u32), True),
    "pmca_sm_memfd": (_int, (_ptr,), True),
    "pmca_sm_wake_read_fd": (_int, (_ptr,), True),
    "pmca_sm_wake_write_fd": (_int, (_ptr,), True),
    "pmca_sm_arm": (_int, (_ptr,), True),
    "pmca_sm_disarm": (None, (_ptr,), True),
    "pmca_sm_segment_size": (_u64, (_ptr,), True),
    "pmca_sm_segment_base": (_u64, (_ptr, _u32), True),
    "pmca_sm_attach": (
        _int,
        (_ptr, _u32, _i32, _i32, _i32, _u64, _int, ctypes.POINTER(_int)),
        True,
    ),
    "pmca_sm_detach": (_int, (_ptr, _u32), True),
    "pmca_sm_peer_alive": (_int, (_ptr, _u32), True),
    "pmca_sm_send": (_int, (_ptr, _u32, _u32, _ptr, _u64, _ptr, _u64), True),
    "pmca_sm_poll": (_int, (_ptr, _ptr), True),
    "pmca_sm_release": (None, (_ptr,), True),
    "pmca_sm_pending": (_int, (_ptr,), True),
    "pmca_sm_wait": (_int, (_ptr, _i64, _u32), False),
    "pmca_sm_interrupt": (None, (_ptr,), True),
    "pmca_sm_stats": (None, (_ptr, _ptr), True),
    "pmca_sm_set_counts": (None, (_ptr, _ptr, _u32), True),
    "pmca_sm_count_kinds": (_u32, (), True),
    "pmca_sm_cma": (_i64, (_i32, _int, _u64, _u64, _u64), False),
    # The lanes' hot calls take no argtypes: every argument is a C int, a
    # bytes object or a prebuilt ctypes object (see lane.c and _lane.py).
    "pmca_sm_lane_send": (_int, (), True),
    "pmca_sm_lane_receive": (_int, (), True),
    # take the caller's buffer object (a ctypes.py_object): the GIL is theirs
    # to give up (lane_buffers.c)
    "pmca_sm_lane_send_buffer": (_int, (), True),
    "pmca_sm_lane_receive_buffer": (_i64, (), True),
    "pmca_sm_lane_send_rget_buffer": (_i64, (), True),
    # may read a whole rendezvous payload with CMA: without the GIL
    "pmca_sm_lane_receive_into": (_i64, (_ptr, _ptr, _u32, _u32, _u32, _u32, _ptr, _u64), False),
    # a blocking rendezvous send polls for its FIN as long as a CMA read may take
    "pmca_sm_lane_await_fin": (_int, (_ptr, _ptr, _u32, _u64), False),
    "pmca_sm_set_lane_cma": (None, (_ptr, _int), True),
    "pmca_sm_lane_send_rget": (_int, (_ptr, _u32, _u32, _i64, _u64, _u64, _u64, _ptr, _u32), True),
    "pmca_sm_lane": (_u32, (_u32, _u32), True),
    "pmca_sm_landing": (_ptr, (_ptr, ctypes.POINTER(_u64)), True),
    "pmca_sm_set_lane_spin": (None, (_ptr, _u64), True),
    "pmca_sm_block_lanes": (None, (_ptr, _int), True),
    "pmca_sm_match_header_size": (_u32, (), True),
    "pmca_sm_attach_problem": (ctypes.c_char_p, (_ptr,), True),
    "pmca_sm_claim_only": (_int, (_ptr, _u32), True),
    "pmca_sm_fault": (ctypes.c_char_p, (_ptr,), True),
    "pmca_sm_peer_closing": (_u32, (_ptr, _u32), True),
}


class Functions:
    """The library's entry points, each bound with the right GIL policy."""

    def __init__(self, lib: ctypes.CDLL) -> None:
        for name, (restype, argtypes, keep_gil) in _PROTOTYPES.items():
            factory = ctypes.PYFUNCTYPE if keep_gil else ctypes.CFUNCTYPE
            prototype = factory(restype, *argtypes)
            setattr(self, name.removeprefix("pmca_sm_"), prototype((name, lib)))
        if (
            self.abi() != ABI
            or self.config_size() != ctypes.sizeof(Config)
            or self.delivery_size() != ctypes.sizeof(Delivery)
            or self.fragment_header_size() != FRAGMENT_HEADER_BYTES
        ):
            raise TransportError(
                errno.EPROTO, f"{LIBRARY_NAME} does not match this pmca version; rebuild it"
            )

    def __getattr__(self, name: str) -> Any:  # typed access to the bound functions
        raise AttributeError(name)


class Closed:
    """Stands in for the library's functions after close: a call raises, never crashes."""

    def __getattr__(self, name: str) -> Any:
        def closed(*_: object) -> Any:
            raise TransportError(errno.EBADF, f"sm transport is closed ({name} called)")

        return closed


__all__ = [
    "ABI",
    "COUNTS",
    "COUNT_INDEX",
    "FRAGMENT_HEADER_BYTES",
    "STAT_NAMES",
    "Closed",
    "Config",
    "Delivery",
    "Functions",
    "Stats",
]
