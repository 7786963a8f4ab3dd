"""Buffers as the transports move them: one dimension of bytes."""

from __future__ import annotations


def flat_bytes(view: memoryview) -> memoryview:
    """A C-contiguous ``view`` as one dimension of bytes; an empty one of any shape
    too (``cast`` refuses a shape that holds a zero)."""
    if view.format == "B" and view.ndim == 1:
        return view
    return view.cast("B") if view.nbytes else memoryview(bytearray())


__all__ = ["flat_bytes"]
