"""A pvar session's sweep: every handle read by one generated function.

A tool sweeping every pvar every millisecond pays for each step a sweep
takes, on the thread it shares with the work it watches, and mostly with
caches the work has just filled. So, as attrs writes an ``__init__`` per
class, a sweep is compiled once per *shape* of session (which handles read
which group field, which read alone) into one function without a loop:
each group of a producer read once, then one list display of
``value + offset`` terms. The values that change with the handles
(offsets, the reads themselves) are passed in lists, so a reset or a new
producer rebuilds those lists and reuses the compiled function; only a new
shape compiles again. The source holds nothing but indices.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Sequence
from typing import Any, Protocol

from ._pvars import PVarGroupField, Reader

__all__ = ["Sweep"]


class _Handle(Protocol):
    """What a sweep asks of a handle (a :class:`~pmca.mca.PVarHandle`)."""

    obj: Any
    _fast: Reader

    def _sweep_source(self) -> tuple[PVarGroupField | None, float, Reader | None] | None: ...

    def read(self) -> float: ...


#: sweep(reads, objs, offsets, marks, fallbacks) -> the handles' values.
_Compiled = Callable[
    [
        Sequence[Callable[[Any], Any]],
        Sequence[Any],
        Sequence[float],
        Sequence["Callable[[float], float] | None"],
        Sequence["Callable[[], float] | None"],
    ],
    list[float],
]


@functools.lru_cache(maxsize=64)
def _compiled(source: str) -> _Compiled:
    namespace: dict[str, Any] = {}
    # the source is built from indices alone (see Sweep), never from a name or value
    exec(compile(source, "<pmca pvar sweep>", "exec"), namespace)
    function: _Compiled = namespace["sweep"]
    return function


class Sweep:
    """How a session reads all its handles, as they are now (made again on any change)."""

    __slots__ = ("_args", "_function")

    def __init__(self, handles: Sequence[_Handle]) -> None:
        reads: list[Callable[[Any], Any]] = []
        objs: list[Any] = []
        offsets: list[float] = []
        marks: list[Callable[[float], float] | None] = []
        fallbacks: list[Callable[[], float] | None] = []
        slots: dict[Any, int] = {}  # a group and obj: its read's place in reads
        lines = ["def sweep(reads, objs, offsets, marks, fallbacks):"]
        terms: list[str] = []
        for i, handle in enumerate(handles):
            how = handle._sweep_source()
            offsets.append(0)
            marks.append(None)
            fallbacks.append(None)
            if how is None:  # a stopped counter, or a pvar without a fast path yet
                fallbacks[i] = handle.read
                terms.append(f"fallbacks[{i}]()")
                continue
            field, offset, mark = how
            offsets[i], marks[i] = offset, mark
            key: Any = None
            if field is not None:
                key = (field.group, handle.obj)
                try:
                    hash(key)
                except TypeError:  # an unhashable obj is read alone
                    key = None
            if key is None:
                reads.append(handle._fast)
                objs.append(handle.obj)
                now = f"reads[{len(reads) - 1}](objs[{len(reads) - 1}])"
            else:
                assert field is not None
                slot = slots.get(key)
                if slot is None:
                    # once per sweep and object: the members come from one instant
                    slot = slots[key] = len(reads)
                    reads.append(field.group.read)
                    objs.append(handle.obj)
                    lines.append(f"    g{slot} = reads[{slot}](objs[{slot}])")
                now = f"g{slot}[{field.index}]"
            terms.append(f"{now} + offsets[{i}]" if mark is None else f"marks[{i}]({now})")
        lines.append(f"    return [{', '.join(terms)}]")
        self._function = _compiled("\n".join(lines) + "\n")
        self._args = (reads, objs, offsets, marks, fallbacks)

    def __call__(self) -> list[float]:
        return self._function(*self._args)
