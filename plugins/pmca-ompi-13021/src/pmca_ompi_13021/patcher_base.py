"""Open MPI 5.0.6's patcher base (``opal/mca/patcher/base/patcher_base_frame.c``).

``opal_patcher`` is one C pointer to the selected module, a struct that
lives inside ``mca_patcher_overwrite.so`` under ``--enable-mca-dso``. Through
it the base calls the module's functions (``patch_symbol``) and reaches the
module's data: ``patch_list`` and ``patch_list_mutex``, which the base itself
constructs at select and destructs at close. 5.0.6 sets it at select and
never resets it, so after the patcher framework closes (and the DSO is
``dlclose``d) it still points into the departed library.

Here the pointer has its two halves: ``opal_patcher`` (the Python module
object, for calls) and ``opal_patcher_data`` (a raw address of the module's
base part inside pmca's overwrite library, for the list and the mutex). The
raw half is what crashes, with or without pmca's address quarantine: on a
fresh load of the library the part is zero (never constructed, since the
guard skipped select), and the list walk follows a NULL link; an unmapped or
quarantined range faults at the first read. pmca's own patcher framework
keeps neither: it reaches its module through the open framework.
"""

from __future__ import annotations

import ctypes
from typing import TYPE_CHECKING

from pmca.patcher import EMPTY_PATCHER, PatcherModule

if TYPE_CHECKING:
    from pmca.mca import OpenFramework
    from pmca.patcher import RestoreOutcome

_libc = ctypes.CDLL(None, use_errno=True)
_libc.pthread_mutex_init.argtypes = [ctypes.c_void_p, ctypes.c_void_p]
_libc.pthread_mutex_destroy.argtypes = [ctypes.c_void_p]
_libc.pthread_mutex_lock.argtypes = [ctypes.c_void_p]
_libc.pthread_mutex_unlock.argtypes = [ctypes.c_void_p]


class _ListItem(ctypes.Structure):
    """``opal_list_item_t``'s links (the sentinel of a list is one too)."""

    _fields_ = (("next", ctypes.c_void_p), ("prev", ctypes.c_void_p))


class _BasePart(ctypes.Structure):
    """The base's part of the module: ``patch_list`` and ``patch_list_mutex``."""

    _fields_ = (
        ("patch_list", _ListItem),
        ("patch_list_length", ctypes.c_uint64),
        ("patch_list_mutex", ctypes.c_byte * 40),  # pthread_mutex_t on Linux/glibc 64-bit
    )


class _Patch(ctypes.Structure):
    """``mca_patcher_base_patch_t``: a list item naming the patched symbol."""

    _fields_ = (("super", _ListItem), ("patch_symbol", ctypes.c_char * 64))


#: The selected patcher module; ``EMPTY_PATCHER`` is Open MPI's ``empty_module``.
opal_patcher: PatcherModule = EMPTY_PATCHER
#: The raw half of ``opal_patcher``: where the module's base part lives, in
#: its native library (0 while ``opal_patcher`` is the empty module).
opal_patcher_data = 0
#: ``OBJ_NEW``'d patches, by address (the C heap kept them alive).
_patches: dict[int, _Patch] = {}


def _part() -> _BasePart:
    return _BasePart.from_address(opal_patcher_data)


def _mutex() -> int:
    return opal_patcher_data + _BasePart.patch_list_mutex.offset


def opal_patcher_base_select(patcher: OpenFramework) -> PatcherModule:
    """Take the selected module into the global and construct its base part.

    patcher_base_frame.c:34-40 selects; :42-43 ``OBJ_CONSTRUCT`` the list and
    the mutex inside the module; :52 sets ``opal_patcher``.
    """
    global opal_patcher, opal_patcher_data
    module = patcher.module()
    base_part = getattr(module, "base_part", None)
    if not isinstance(module, PatcherModule) or base_part is None:
        raise TypeError(f"patcher framework selected {module!r}, not an Open MPI-layout module")
    address, size = base_part()
    if size < ctypes.sizeof(_BasePart):
        raise TypeError(f"{module!r} has a {size}-byte base part, not {ctypes.sizeof(_BasePart)}")
    part = _BasePart.from_address(address)
    sentinel = address + _BasePart.patch_list.offset
    part.patch_list.next = part.patch_list.prev = sentinel
    part.patch_list_length = 0
    _libc.pthread_mutex_init(address + _BasePart.patch_list_mutex.offset, None)
    opal_patcher, opal_patcher_data = module, address
    return module


def opal_patcher_patch_symbol(symbol: str, *, owner: str) -> None:
    """``opal_patcher->patch_symbol``: patch, then append the patch to ``patch_list``.

    patcher_overwrite_module.c appends each patch under ``patch_list_mutex``.
    """
    opal_patcher.patch_symbol(symbol, owner=owner)
    patch = _Patch(patch_symbol=symbol.encode())
    item = ctypes.addressof(patch)
    _patches[item] = patch
    part = _part()
    _libc.pthread_mutex_lock(_mutex())
    try:
        sentinel = opal_patcher_data + _BasePart.patch_list.offset
        last = part.patch_list.prev
        patch.super.prev, patch.super.next = last, sentinel
        _ListItem.from_address(last).next = item
        part.patch_list.prev = item
        part.patch_list_length += 1
    finally:
        _libc.pthread_mutex_unlock(_mutex())


def opal_patcher_base_restore_all() -> list[RestoreOutcome]:
    """Restore every patch, through the global: where #13021 crashed.

    patcher_base_frame.c:61 returns for the empty module; :65 locks the
    module's mutex; :67-71 walk ``patch_list`` backwards, restoring and
    releasing each patch. pmca's module restores its patches (last applied
    first) in one call; the walk over the module's own data is kept as is.
    """
    if opal_patcher is EMPTY_PATCHER:
        return []
    part = _part()
    _libc.pthread_mutex_lock(_mutex())
    try:
        sentinel = opal_patcher_data + _BasePart.patch_list.offset
        walked: list[int] = []
        # A NULL link (an unconstructed list) is followed like any other.
        item = part.patch_list.prev or 0
        while item != sentinel:
            walked.append(item)
            item = _ListItem.from_address(item).prev or 0
        outcomes = opal_patcher.restore_all() if walked else []
        for item in walked:
            _patches.pop(item, None)
        part.patch_list.next = part.patch_list.prev = sentinel
        part.patch_list_length = 0
    finally:
        _libc.pthread_mutex_unlock(_mutex())
    return outcomes


def opal_patcher_base_close() -> list[RestoreOutcome]:
    """The patcher framework's close; ``opal_patcher`` is NOT reset (5.0.6).

    patcher_base_frame.c:80 returns for the empty module; :84 restores all;
    :86-87 destruct the list (a release build leaves it constructed empty)
    and the mutex.
    """
    if opal_patcher is EMPTY_PATCHER:
        return []
    outcomes = opal_patcher_base_restore_all()
    _libc.pthread_mutex_destroy(_mutex())
    return outcomes
