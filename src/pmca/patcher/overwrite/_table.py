"""Typed view of libpmca_patcher_overwrite.so's patch table.

The library is opened by pmca's component loader (so that a dso-mode
component really unloads it); this wrapper only ever receives the handle.
"""

from __future__ import annotations

import ctypes
import errno
import os
from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:
    from pathlib import Path

    from .._patches import PatchRecord

LIBRARY_NAME = "libpmca_patcher_overwrite.so"
#: Where the bookkeeping library is installed: next to this module.
LIBRARY_FILE = os.path.join(os.path.dirname(__file__), LIBRARY_NAME)
MAX_PATCH_BYTES = 32
NAME_LENGTH = 64


def library_path() -> Path:
    """:data:`LIBRARY_FILE` as a :class:`pathlib.Path`."""
    from pathlib import Path

    return Path(LIBRARY_FILE)


class PatchLike(Protocol):
    """What :meth:`PatchTable.add` needs from a patch (a ``pmca.native.PatchSite`` fits)."""

    @property
    def symbol(self) -> str: ...
    @property
    def patch_address(self) -> int: ...
    @property
    def original(self) -> bytes: ...
    @property
    def patched(self) -> bytes: ...


class _RecordStruct(ctypes.Structure):
    """struct pmca_patch_record."""

    _fields_ = (
        ("symbol", ctypes.c_char * NAME_LENGTH),
        ("owner", ctypes.c_char * NAME_LENGTH),
        ("address", ctypes.c_uint64),
        ("length", ctypes.c_uint32),
        ("reserved", ctypes.c_uint32),
        ("original", ctypes.c_uint8 * MAX_PATCH_BYTES),
        ("patched", ctypes.c_uint8 * MAX_PATCH_BYTES),
    )


def _record(raw: _RecordStruct) -> PatchRecord:
    from .._patches import PatchRecord

    return PatchRecord(
        symbol=raw.symbol.decode(),
        address=raw.address,
        original=bytes(raw.original[: raw.length]),
        patched=bytes(raw.patched[: raw.length]),
        owner=raw.owner.decode(),
    )


def _encode_name(what: str, value: str) -> bytes:
    encoded = value.encode()
    if not encoded or len(encoded) >= NAME_LENGTH or b"\0" in encoded:
        raise ValueError(f"{what} {value!r} must be 1-{NAME_LENGTH - 1} bytes without NUL")
    return encoded


class PatchTable:
    """The applied-patch records, in application order, kept in native memory."""

    def __init__(self, lib: ctypes.CDLL) -> None:
        self._lib = lib
        # Not POINTER(_RecordStruct): ctypes caches pointer types forever, and
        # a dso reload defines a new _RecordStruct each time (a leak per cycle).
        record_p = ctypes.c_void_p
        byte_p = ctypes.POINTER(ctypes.c_uint8)
        prototypes: dict[str, tuple[type, list[type]]] = {
            "pmca_patcher_add": (
                ctypes.c_int,
                [
                    ctypes.c_char_p,
                    ctypes.c_uint64,
                    byte_p,
                    byte_p,
                    ctypes.c_uint32,
                    ctypes.c_char_p,
                ],
            ),
            "pmca_patcher_count": (ctypes.c_int, []),
            "pmca_patcher_get": (ctypes.c_int, [ctypes.c_int, record_p]),
            "pmca_patcher_pop": (ctypes.c_int, [record_p]),
            "pmca_patcher_capacity": (ctypes.c_int, []),
            "pmca_patcher_record_size": (ctypes.c_uint32, []),
            "pmca_patcher_base_part_size": (ctypes.c_uint32, []),
        }
        for name, (restype, argtypes) in prototypes.items():
            function = getattr(lib, name)
            function.restype = restype
            function.argtypes = argtypes
        if lib.pmca_patcher_record_size() != ctypes.sizeof(_RecordStruct):
            raise RuntimeError(f"{LIBRARY_NAME} does not match this pmca version; rebuild it")

    def base_part(self) -> tuple[int, int]:
        """Address and size of the module's base part inside the library.

        Storage for a patcher base that keeps Open MPI's module layout
        (``patch_list``, ``patch_list_mutex``); zero at every load.
        """
        address = ctypes.addressof(ctypes.c_char.in_dll(self._lib, "pmca_patcher_base_part"))
        return address, int(self._lib.pmca_patcher_base_part_size())

    @property
    def capacity(self) -> int:
        return int(self._lib.pmca_patcher_capacity())

    def add(self, site: PatchLike, owner: str) -> int:
        """Record ``site`` as applied by ``owner``; returns its position."""
        if len(site.original) != len(site.patched):
            raise ValueError("original and patched bytes must have the same length")
        length = len(site.original)
        if not 0 < length <= MAX_PATCH_BYTES:
            raise ValueError(f"a patch must be 1-{MAX_PATCH_BYTES} bytes, not {length}")
        original = (ctypes.c_uint8 * length).from_buffer_copy(site.original)
        patched = (ctypes.c_uint8 * length).from_buffer_copy(site.patched)
        index = int(
            self._lib.pmca_patcher_add(
                _encode_name("symbol", site.symbol),
                site.patch_address,
                original,
                patched,
                length,
                _encode_name("owner", owner),
            )
        )
        if index == -errno.ENOSPC:
            raise OverflowError(f"the patch table is full ({self.capacity} patches)")
        if index < 0:
            raise ValueError(f"cannot record patch of {site.symbol}: {os.strerror(-index)}")
        return index

    def records(self) -> list[PatchRecord]:
        """Every record, first applied first."""
        records = []
        raw = _RecordStruct()
        for index in range(len(self)):
            if self._lib.pmca_patcher_get(index, ctypes.byref(raw)) != 0:
                break  # popped concurrently
            records.append(_record(raw))
        return records

    def pop(self) -> PatchRecord | None:
        """Remove and return the most recently applied record."""
        raw = _RecordStruct()
        if self._lib.pmca_patcher_pop(ctypes.byref(raw)) != 1:
            return None
        return _record(raw)

    def __len__(self) -> int:
        return int(self._lib.pmca_patcher_count())
