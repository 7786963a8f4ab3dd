"""Release events as Python sees them."""

from __future__ import annotations

from typing import Literal

import attrs

ReleaseKind = Literal[
    "munmap", "madvise", "mremap", "brk", "shmdt", "mmap_fixed", "vm_unmapped", "overflow"
]

#: Kind of the events UCX's ucm delivers (``UCM_EVENT_VM_UNMAPPED``): a range
#: about to be released by any release call, which ucm does not name.
UCM_KIND: Literal["vm_unmapped"] = "vm_unmapped"

#: Exclusive end of the address range callbacks are told about; it still fits
#: a C ``size_t``, so ``address + length`` can be handed to native code as is.
END_OF_MEMORY = 2**64 - 1

#: Kind of the notification sent when events were lost (the ring was full, or
#: a fork discarded queued events): every cached translation must be dropped.
OVERFLOW_KIND: Literal["overflow"] = "overflow"


@attrs.frozen(slots=True)
class ReleaseEvent:
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


@attrs.frozen(slots=True)
class Drained:
    """What one :meth:`HookBackend.drain` pulled out of the native ring.

    ``dropped`` counts events lost since the previous drain; ``overflowed`` is
    true whenever any were, and the consumer must then treat all memory as
    released.
    """

    events: tuple[ReleaseEvent, ...]
    overflowed: bool
    dropped: int
