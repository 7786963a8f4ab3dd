"""MPI's matching rules: posted receives and unexpected messages, wildcards included.

A message matches the receive posted first among those whose source and tag
it satisfies (:data:`ANY_SOURCE` and :data:`ANY_TAG` satisfy every source and
tag); a receive matches the unexpected message that arrived first among
those it accepts. Messages from one source reach matching in the order they
were sent (the sequence numbers), so a source's messages never overtake each
other, whichever receives take them.

Receives with a specific source and tag sit in per-stream queues, as before
wildcards existed: with no wildcard receive posted, matching a message costs
one dictionary look-up. Wildcard receives sit in one queue of their own;
each posted receive carries a posting number, so a message takes whichever
of its stream's first receive and the first wildcard that accepts it was
posted earlier.
"""

from __future__ import annotations

import itertools
from collections import deque
from typing import TYPE_CHECKING, Generic, Protocol, TypeVar

if TYPE_CHECKING:
    from collections.abc import Iterator

#: Receive from whichever rank sends first (MPI_ANY_SOURCE).
ANY_SOURCE = -1
#: Receive a message whatever its tag (MPI_ANY_TAG).
ANY_TAG = -1
#: The largest tag (MPI_TAG_UB): tags are ``0..TAG_UB``.
TAG_UB = (1 << 62) - 1


class _Matchable(Protocol):
    order: int

    @property
    def source(self) -> int: ...
    @property
    def tag(self) -> int: ...


Entry = TypeVar("Entry", bound=_Matchable)


def accepts(source: int, tag: int, entry_source: int, entry_tag: int) -> bool:
    """Whether a receive for ``(source, tag)`` (wildcards allowed) takes that message."""
    return source in (ANY_SOURCE, entry_source) and tag in (ANY_TAG, entry_tag)


class _Queues(Generic[Entry]):
    """Entries per (source, tag) stream, each with a number giving the global order."""

    def __init__(self) -> None:
        self.streams: dict[tuple[int, int], deque[Entry]] = {}
        self._numbers = itertools.count()

    def _number(self, entry: Entry) -> None:
        entry.order = next(self._numbers)

    def _pop(self, key: tuple[int, int], entry: Entry) -> None:
        queue = self.streams[key]
        if queue[0] is entry:
            queue.popleft()
        else:
            queue.remove(entry)
        if not queue:
            del self.streams[key]


class Posted(_Queues[Entry]):
    """Receives waiting for a message, in the order they were posted."""

    def __init__(self) -> None:
        super().__init__()
        #: Receives with ANY_SOURCE or ANY_TAG, in posting order.
        self.wild: list[Entry] = []

    def __bool__(self) -> bool:
        return bool(self.streams) or bool(self.wild)

    def add(self, entry: Entry) -> None:
        self._number(entry)
        if entry.source == ANY_SOURCE or entry.tag == ANY_TAG:
            self.wild.append(entry)
        else:
            self.streams.setdefault((entry.source, entry.tag), deque()).append(entry)

    def first(self, source: int, tag: int) -> Entry | None:
        """The receive a message from ``source`` with ``tag`` would match (left in place)."""
        queue = self.streams.get((source, tag))
        specific = queue[0] if queue else None
        if not self.wild:
            return specific
        for entry in self.wild:
            if accepts(entry.source, entry.tag, source, tag):
                if specific is None or entry.order < specific.order:
                    return entry
                break
        return specific

    def take(self, source: int, tag: int) -> Entry | None:
        """Remove and return the receive a message from ``source`` with ``tag`` matches."""
        if not self.wild:  # the common case: one look-up
            queue = self.streams.get((source, tag))
            if queue is None:
                return None
            taken = queue.popleft()
            if not queue:
                del self.streams[(source, tag)]
            return taken
        entry = self.first(source, tag)
        if entry is not None:
            self.remove(entry)
        return entry

    def waiting(self, source: int, tag: int) -> bool:
        """Whether any posted receive would take a message from ``source`` with ``tag``."""
        return (source, tag) in self.streams or any(
            accepts(e.source, e.tag, source, tag) for e in self.wild
        )

    def remove(self, entry: Entry) -> bool:
        """Withdraw ``entry``; ``False`` when it is not posted (matched already)."""
        if entry.source == ANY_SOURCE or entry.tag == ANY_TAG:
            try:
                self.wild.remove(entry)
            except ValueError:
                return False
            return True
        key = (entry.source, entry.tag)
        if entry not in self.streams.get(key, ()):
            return False
        self._pop(key, entry)
        return True

    def drop_source(self, source: int) -> None:
        """Forget the receives naming ``source`` (its peer failed; they are completed)."""
        for key in [k for k in self.streams if k[0] == source]:
            del self.streams[key]

    def __iter__(self) -> Iterator[Entry]:
        for queue in self.streams.values():
            yield from queue
        yield from self.wild


class Unexpected(_Queues[Entry]):
    """Messages that arrived before a receive took them, in arrival order."""

    def __init__(self) -> None:
        super().__init__()
        self._arrivals: dict[int, Entry] = {}

    def __bool__(self) -> bool:
        return bool(self._arrivals)

    def __len__(self) -> int:
        return len(self._arrivals)

    def add(self, entry: Entry) -> None:
        self._number(entry)
        self._arrivals[entry.order] = entry
        self.streams.setdefault((entry.source, entry.tag), deque()).append(entry)

    def first(self, source: int, tag: int) -> Entry | None:
        """The message a receive for ``(source, tag)`` would take (left in place)."""
        if source != ANY_SOURCE and tag != ANY_TAG:
            queue = self.streams.get((source, tag))
            return queue[0] if queue else None
        for entry in self._arrivals.values():
            if accepts(source, tag, entry.source, entry.tag):
                return entry
        return None

    def take(self, source: int, tag: int) -> Entry | None:
        entry = self.first(source, tag)
        if entry is not None:
            self.remove(entry)
        return entry

    def remove(self, entry: Entry) -> None:
        del self._arrivals[entry.order]
        self._pop((entry.source, entry.tag), entry)


__all__ = ["ANY_SOURCE", "ANY_TAG", "TAG_UB", "Posted", "Unexpected", "accepts"]
