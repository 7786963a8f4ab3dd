"""The steady-state allocation measurement of ``test_steady_state_allocation``.

Imported by the one-process test and prepended (its source) to the program
of each rank of the two-process ones.
"""

from __future__ import annotations

import gc
import tracemalloc
from collections.abc import Callable
from typing import Any


def buffers(kind: str, size: int) -> tuple[Any, Any]:
    """Two ``size``-byte buffers of ``kind`` (``bytearray`` or ``numpy``): out and into."""
    if kind == "numpy":
        import numpy

        return numpy.zeros(size, numpy.uint8), numpy.zeros(size, numpy.uint8)
    return bytearray(size), bytearray(size)


def measure(rounds: Callable[[int, bool], None], count: int, windows: int = 3) -> list[list[int]]:
    """``[bytes kept, peak above the start]`` per window of ``rounds(count, small)``.

    The first window's messages are small (and it is a tenth as long), every
    other's large. Both sizes run some round trips first: every lazy table
    and cache is built before tracing starts.
    """
    rounds(min(count, 200), True)
    rounds(min(count, 200), False)
    results = []
    tracemalloc.start()
    try:
        for window in range(windows + 1):
            gc.collect()
            tracemalloc.reset_peak()
            start = tracemalloc.get_traced_memory()[0]
            rounds(count if window else count // 10 + 1, window == 0)
            gc.collect()
            current, peak = tracemalloc.get_traced_memory()
            results.append([current - start, peak - start])
    finally:
        tracemalloc.stop()
    return results


__all__ = ["buffers", "measure"]
