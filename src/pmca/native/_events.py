"""Release events as Python sees them: one at a time, or a whole batch at once."""

from __future__ import annotations

import array
from collections.abc import Iterator
from typing import Final, Literal

import attrs

from .._public import public
from .._records import FrozenValue

ReleaseKind = Literal[
    "munmap", "madvise", "mremap", "brk", "shmdt", "mmap_fixed", "vm_unmapped", "overflow"
]

#: Kind of the events UCX's ucm delivers (``UCM_EVENT_VM_UNMAPPED``): a range
#: about to be released by any release call, which ucm does not name.
UCM_KIND: Literal["vm_unmapped"] = "vm_unmapped"

#: Exclusive end of the address range callbacks are told about; it still fits
#: a C ``size_t``, so ``address + length`` can be handed to native code as is.
END_OF_MEMORY = 2**64 - 1

#: Kind of the notification sent when events were lost (the ring was full, a
#: producer stalled past the drain's bound, or a fork discarded queued
#: events): every cached translation must be dropped.
OVERFLOW_KIND: Literal["overflow"] = "overflow"

#: Bytes per record of a :class:`ReleaseBatch` (C ``struct pmca_event``).
RECORD_SIZE: Final = 24


class _KindNames(dict[int, str]):
    """C ``enum pmca_kind`` -> name; a code this pmca does not know reads as
    "munmap", the kind every consumer treats conservatively."""

    def __missing__(self, code: int) -> str:
        return "munmap"


KIND_NAMES: Final[dict[int, str]] = _KindNames(
    {
        1: "munmap",
        2: "madvise",
        3: "mremap",
        4: "brk",
        5: "shmdt",
        6: "mmap_fixed",
        7: "vm_unmapped",
    }
)


@public
@attrs.frozen(eq=False, repr=False)
class ReleaseEvent(FrozenValue):
    """Memory in ``[address, address + length)`` was released.

    ``from_alloc`` has Open MPI's meaning: the release may come from inside an
    allocator (True for every hooked call except ``shmdt``).

    ``shmdt`` cannot know the segment size, so its range runs to
    :data:`END_OF_MEMORY`.  The overflow notification covers everything:
    ``address=0, length=END_OF_MEMORY, kind="overflow"``.
    """

    address: int
    length: int
    kind: ReleaseKind
    from_alloc: bool

    @property
    def end(self) -> int:
        """Exclusive end of the released range."""
        return self.address + self.length

    def overlaps(self, start: int, end: int) -> bool:
        """Whether ``[start, end)`` intersects the released range."""
        return start < self.end and self.address < end


OVERFLOW_EVENT = ReleaseEvent(0, END_OF_MEMORY, OVERFLOW_KIND, True)


@public
@attrs.frozen(eq=False, repr=False)
class Drained(FrozenValue):
    """What one :meth:`HookBackend.drain` pulled out of the native ring.

    ``dropped`` counts events lost since the previous pull; ``overflowed`` is
    true whenever any were, and the consumer must then treat all memory as
    released.
    """

    events: tuple[ReleaseEvent, ...]
    overflowed: bool
    dropped: int


@public
class ReleaseBatch:
    """Release records handed to a batch subscriber in one call.

    Nothing is decoded until asked for: the columns are zero-copy strided
    views (``memoryview``) of the records as the native ring wrote them, so
    a cache can scan them (or hand them to numpy) without one Python object
    per event.  Valid only during the callback: copy what you keep.

    ``overflow`` true means events were lost before these records: treat
    every address as released, then apply the records (there may be none).
    """

    __slots__ = ("_data", "overflow")

    def __init__(self, data: memoryview, overflow: bool) -> None:
        self._data = data
        self.overflow = overflow

    def __len__(self) -> int:
        return len(self._data) // RECORD_SIZE

    def __repr__(self) -> str:
        flag = ", overflow" if self.overflow else ""
        return f"<ReleaseBatch of {len(self)} records{flag}>"

    @property
    def data(self) -> memoryview:
        """The raw records, C ``struct pmca_event`` (``<QQII``) each."""
        return self._data

    @property
    def records(self) -> memoryview:
        """Records as unsigned 64-bit words, shape ``(n, 3)``: address, length,
        then kind in the low and ``from_alloc`` in the high 32 bits."""
        return self._data.cast("Q", [len(self), 3])

    @property
    def addresses(self) -> memoryview:
        return self._data.cast("Q")[0::3]

    @property
    def lengths(self) -> memoryview:
        """shmdt's unknown segment size already reads "to the end of memory"."""
        return self._data.cast("Q")[1::3]

    @property
    def kinds(self) -> memoryview:
        """Kind codes; :data:`KIND_NAMES` maps them to names."""
        return self._data.cast("I")[4::6]

    @property
    def from_alloc(self) -> memoryview:
        return self._data.cast("I")[5::6]

    def __iter__(self) -> Iterator[tuple[int, int, str, bool]]:
        """``(address, length, kind, from_alloc)`` per record: convenient, not fast."""
        columns = decode_columns(self._data)
        return zip(*columns, strict=True)


Columns = tuple[list[int], list[int], list[str], list[bool]]
#: Addresses as a list; lengths, kinds and from_alloc as lists, or, when every
#: record has the same one (the usual case for kinds), as one value each.
FastColumns = tuple[list[int], list[int] | int, list[str] | str, list[bool] | bool]


def _uniform(column: memoryview) -> bool:
    """Whether every item of a 'Q' column equals the first (one C comparison,
    which stops at the first difference)."""
    count = len(column)
    return bool(count) and column == memoryview(array.array("Q", [column[0]]) * count)


def decode_fast(data: memoryview) -> FastColumns:
    """Like :func:`decode_columns`, but columns whose records all agree (the
    kind and ``from_alloc`` nearly always, the length often) cost no
    per-record decoding."""
    words = data.cast("Q")
    lengths = words[1::3]
    tags = words[2::3]  # kind | from_alloc << 32, per record
    addresses = words[0::3].tolist()
    length: list[int] | int = lengths[0] if _uniform(lengths) else lengths.tolist()
    if _uniform(tags):
        tag = tags[0]
        return addresses, length, KIND_NAMES[tag & 0xFFFFFFFF], bool(tag >> 32)
    halves = data.cast("I")
    return (
        addresses,
        length,
        list(map(KIND_NAMES.__getitem__, halves[4::6].tolist())),
        list(map(bool, halves[5::6].tolist())),
    )


def decode_columns(data: memoryview) -> Columns:
    """The records as four lists, built by C loops (no per-event Python code)."""
    words = data.cast("Q")
    halves = data.cast("I")
    return (
        words[0::3].tolist(),
        words[1::3].tolist(),
        list(map(KIND_NAMES.__getitem__, halves[4::6].tolist())),
        list(map(bool, halves[5::6].tolist())),
    )
