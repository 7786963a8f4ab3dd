"""Buffers users hand to p2p: any C-contiguous buffer-protocol object."""

from __future__ import annotations

import ctypes
from typing import Any

from ..btl.base._buffers import flat_bytes


class _PyBuffer(ctypes.Structure):
    _fields_ = [
        ("buf", ctypes.c_void_p),
        ("obj", ctypes.py_object),
        ("len", ctypes.c_ssize_t),
        ("itemsize", ctypes.c_ssize_t),
        ("readonly", ctypes.c_int),
        ("ndim", ctypes.c_int),
        ("format", ctypes.c_char_p),
        ("shape", ctypes.c_void_p),
        ("strides", ctypes.c_void_p),
        ("suboffsets", ctypes.c_void_p),
        ("internal", ctypes.c_void_p),
    ]


_get_buffer = ctypes.pythonapi.PyObject_GetBuffer
_get_buffer.argtypes = [ctypes.py_object, ctypes.POINTER(_PyBuffer), ctypes.c_int]
_get_buffer.restype = ctypes.c_int
_release_buffer = ctypes.pythonapi.PyBuffer_Release
_release_buffer.argtypes = [ctypes.POINTER(_PyBuffer)]
_release_buffer.restype = None
_byte_at = ctypes.c_char.from_buffer
_PyBUF_SIMPLE = 0


def as_bytes(buffer: Any, *, writable: bool, rank: int, tag: int) -> memoryview:
    """A flat byte view of ``buffer``; a clear error for anything unusable."""
    kind = type(buffer)
    if kind is bytearray or (kind is bytes and not writable):
        return memoryview(buffer)  # flat, contiguous, and writable where it must be
    try:
        view = memoryview(buffer)
    except TypeError:
        what = _what(writable, rank, tag)
        raise TypeError(
            f"{what}: {type(buffer).__name__} does not support the buffer protocol "
            "(pass bytes, bytearray, memoryview, array.array or a numpy array)"
        ) from None
    if not view.c_contiguous:
        what = _what(writable, rank, tag)
        raise ValueError(f"{what}: the buffer is not C-contiguous (copy it first)")
    if writable and view.readonly:
        what = _what(writable, rank, tag)
        raise TypeError(f"{what}: the receive buffer is read-only ({type(buffer).__name__})")
    return flat_bytes(view)


def _what(writable: bool, rank: int, tag: int) -> str:
    return (
        f"p2p recv from rank {rank} tag {tag}" if writable else f"p2p send to rank {rank} tag {tag}"
    )


def address_of(view: memoryview) -> int:
    """The address of a contiguous view's first byte (read-only views too)."""
    if view.nbytes == 0:
        return 0
    if not view.readonly:  # a sixth of the cost of the buffer-protocol round trip below
        return ctypes.addressof(_byte_at(view))
    record = _PyBuffer()
    if _get_buffer(view, ctypes.byref(record), _PyBUF_SIMPLE) != 0:
        raise TypeError("cannot get the address of this buffer")
    try:
        return int(record.buf or 0)
    finally:
        _release_buffer(ctypes.byref(record))
