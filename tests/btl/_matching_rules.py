"""MPI matching with several senders: a shared schedule, its execution, the rules checked.

A :class:`Round` says what each sender sends to the receiver (rank 0) and
which receives and probes the receiver makes. Every rank of a job draws the
same round (:func:`draw` from a seeded or hypothesis-made ``Random``); the
senders run :func:`send_round`, the receiver :func:`receive_round`, which
returns what the round did against MPI's rules (empty when nothing).

With several senders the order in which their messages reach the receiver
is not determined, so the check is not one expected outcome but the rules
every outcome must keep:

- every message is received once, intact, with a status that describes it,
  by a receive (or probe) whose source and tag accept it;
- a probe describes the message the receive after it takes;
- non-overtaking: of two messages from one source, a receive posted earlier
  that accepts both cannot take the later one while a receive posted later
  takes the earlier one;
- a receive posted earlier comes first: a receive left unmatched at the end
  accepts no message that a receive posted after it took;
- and, when those hold, the whole outcome is one MPI allows: some order of
  arrival (each source's messages in the order sent) leads MPI's matching
  to exactly these choices (:func:`explained`, a search).

Blocking receives and probes are made only when the messages still to come
guarantee they finish (else they become ``irecv``/``iprobe``/``improbe``),
so a round never waits on a message that another receive may take.
"""

from __future__ import annotations

import random
import struct
import time
from collections import Counter
from dataclasses import asdict, dataclass
from typing import Any

from pmca.p2p import ANY_SOURCE, ANY_TAG, wait_all, wait_any

TAGS = (0, 1, 2)
#: Eager and rendezvous sizes (the tests keep every btl's eager limit between them).
SIZES = (16, 3000, 70_000)
#: Sends up to this size are eager on every btl tested: a blocking one never
#: waits for the receiver, so a sender cannot wait on a receiver waiting on it.
BLOCKING_LIMIT = 3000
CAPACITY = max(SIZES)
KINDS = ("irecv", "recv", "probe", "iprobe", "mprobe", "improbe")
#: The head of every payload: round, source, index in the source's sends, size.
HEAD = struct.Struct("<IIII")


@dataclass(frozen=True)
class Send:
    tag: int
    size: int
    blocking: bool
    pause: bool  # sleep a little first: other interleavings of the senders


@dataclass(frozen=True)
class Op:
    kind: str
    source: int
    tag: int


@dataclass
class Round:
    number: int
    sends: dict[int, list[Send]]
    ops: list[Op]

    def to_json(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Round:
        return cls(
            data["number"],
            {int(rank): [Send(**s) for s in sends] for rank, sends in data["sends"].items()},
            [Op(**op) for op in data["ops"]],
        )


def draw(rng: random.Random, number: int, senders: list[int], most: int = 10) -> Round:
    """A round: up to ``most`` sends per sender, up to twice as many receiver operations."""
    sends = {}
    for rank in senders:
        sequence = []
        for _ in range(rng.randint(0, most)):
            size = rng.choice(SIZES)
            blocking = size <= BLOCKING_LIMIT and rng.random() < 0.5
            sequence.append(Send(rng.choice(TAGS), size, blocking, rng.random() < 0.1))
        sends[rank] = sequence
    ops = [
        Op(rng.choice(KINDS), rng.choice([ANY_SOURCE, *senders]), rng.choice([ANY_TAG, *TAGS]))
        for _ in range(rng.randint(0, 2 * most))
    ]
    return Round(number, sends, ops)


def accepts(source: int, tag: int, message_source: int, message_tag: int) -> bool:
    return source in (ANY_SOURCE, message_source) and tag in (ANY_TAG, message_tag)


def _overlap(a: int, b: int, wild: int) -> bool:
    return a in (wild, b) or b == wild


def payload(number: int, source: int, index: int, size: int) -> bytes:
    fill = bytes([(source * 37 + index * 11 + number) % 256])
    return HEAD.pack(number, source, index, size) + fill * (size - HEAD.size)


def send_round(p2p: Any, round_: Round, receiver: int, timeout: float) -> int:
    """This rank's sends of the round, in order; returns when all completed."""
    me = p2p.rank
    requests = []
    for index, send in enumerate(round_.sends.get(me, [])):
        if send.pause:
            time.sleep(0.002)
        data = payload(round_.number, me, index, send.size)
        if send.blocking:
            p2p.send(receiver, send.tag, data, timeout=timeout)
        else:
            requests.append(p2p.isend(receiver, send.tag, data))
    wait_all(requests, timeout=timeout)
    return len(round_.sends.get(me, []))


@dataclass
class Taken:
    """One receive (or matched probe) of the receiver, numbered in posting order."""

    number: int
    kind: str
    source: int
    tag: int
    status: tuple[int, int, int] | None = None  # source, tag, count
    head: tuple[int, int, int, int] | None = None
    intact: bool = False
    probed: tuple[int, int, int] | None = None
    cancelled: bool = False

    def describe(self) -> str:
        source = "ANY_SOURCE" if self.source == ANY_SOURCE else str(self.source)
        tag = "ANY_TAG" if self.tag == ANY_TAG else str(self.tag)
        return f"receive #{self.number} {self.kind}({source}, {tag})"


class _Receiver:
    def __init__(self, p2p: Any, round_: Round, timeout: float) -> None:
        self.p2p = p2p
        self.round = round_
        self.timeout = timeout
        self.records: list[Taken] = []
        self.pending: list[tuple[Taken, Any, bytearray]] = []
        #: (source, tag) -> messages no finished receive has taken yet
        self.left: Counter[tuple[int, int]] = Counter(
            (rank, send.tag) for rank, sends in round_.sends.items() for send in sends
        )
        self.total = sum(self.left.values())
        self.taken = 0

    def _record(self, kind: str, source: int, tag: int) -> Taken:
        record = Taken(len(self.records), kind, source, tag)
        self.records.append(record)
        return record

    def _landed(self, record: Taken, status: Any, out: bytearray) -> None:
        record.status = (status.source, status.tag, status.count)
        record.cancelled = status.cancelled
        if status.cancelled:
            return
        self.left[(status.source, status.tag)] -= 1
        self.taken += 1
        if status.count >= HEAD.size:
            record.head = HEAD.unpack_from(out)
            number, source, index, size = record.head
            record.intact = status.count == size and bytes(out[:size]) == payload(
                number, source, index, size
            )

    def _post(self, kind: str, source: int, tag: int) -> Taken:
        record = self._record(kind, source, tag)
        out = bytearray(CAPACITY)
        self.pending.append((record, self.p2p.irecv(source, tag, out), out))
        return record

    def _reap(self) -> None:
        still = []
        for record, request, out in self.pending:
            if request.done:
                request.wait(timeout=self.timeout)  # raises the request's error
                self._landed(record, request.status, out)
            else:
                still.append((record, request, out))
        self.pending = still

    def _certain(self, source: int, tag: int) -> bool:
        """Whether a message for (source, tag) is sure to reach this rank's next call.

        Each receive still pending takes at most one message; a message it
        took but has not finished is still counted as left, and so is that
        receive, so the two cancel.
        """
        coming = sum(n for (s, t), n in self.left.items() if accepts(source, tag, s, t))
        ahead = sum(
            1
            for record, _, _ in self.pending
            if _overlap(record.source, source, ANY_SOURCE) and _overlap(record.tag, tag, ANY_TAG)
        )
        return coming > ahead

    def _receive_now(self, kind: str, source: int, tag: int, probed: Any = None) -> None:
        record = self._record(kind, source, tag)
        if probed is not None:
            record.probed = (probed.source, probed.tag, probed.count)
        out = bytearray(CAPACITY)
        status = self.p2p.recv(source, tag, out, timeout=self.timeout, status=True)
        self._landed(record, status, out)

    def run(self) -> None:
        p2p, timeout = self.p2p, self.timeout
        for op in self.round.ops:
            self._reap()
            certain = self._certain(op.source, op.tag)
            if op.kind == "irecv" or (op.kind == "recv" and not certain):
                self._post("irecv", op.source, op.tag)
            elif op.kind == "recv":
                self._receive_now("recv", op.source, op.tag)
            elif op.kind in ("probe", "iprobe"):
                if op.kind == "probe" and certain:
                    status = p2p.probe(op.source, op.tag, timeout=timeout)
                else:
                    status = p2p.iprobe(op.source, op.tag)
                if status is not None:
                    self._receive_now(f"recv after {op.kind}", op.source, op.tag, status)
            else:
                if op.kind == "mprobe" and certain:
                    message = p2p.mprobe(op.source, op.tag, timeout=timeout)
                else:
                    message = p2p.improbe(op.source, op.tag)
                if message is not None:
                    record = self._record(op.kind, op.source, op.tag)
                    record.probed = (
                        message.status.source,
                        message.status.tag,
                        message.status.count,
                    )
                    out = bytearray(CAPACITY)
                    self._landed(record, message.recv(out, timeout=timeout, status=True), out)
        drain: Taken | None = None
        while self.taken < self.total:
            if drain is None:
                drain = self._post("drain irecv", ANY_SOURCE, ANY_TAG)
            wait_any([request for _, request, _ in self.pending], timeout=timeout)
            self._reap()
            if all(record is not drain for record, _, _ in self.pending):
                drain = None
        for record, request, out in self.pending:
            if not request.cancel():  # it matched a message nobody sent in this round
                request.wait(timeout=timeout)
            self._landed(record, request.status, out)
        self.pending = []


def receive_round(p2p: Any, round_: Round, timeout: float) -> list[str]:
    """Run the receiver's side of ``round_``; what it did against MPI's rules."""
    receiver = _Receiver(p2p, round_, timeout)
    receiver.run()
    left = p2p.iprobe(ANY_SOURCE, ANY_TAG)
    problems = violations(round_, receiver.records)
    if left is not None:
        problems.append(f"a message nobody received is left over: {left}")
    return problems


def violations(round_: Round, records: list[Taken]) -> list[str]:
    """What ``records`` (the receiver's receives, in posting order) did against MPI's rules."""
    sent = {
        (rank, index): send
        for rank, sends in round_.sends.items()
        for index, send in enumerate(sends)
    }
    problems: list[str] = []
    owner: dict[tuple[int, int], Taken] = {}
    for record in records:
        if record.cancelled:
            continue
        head = record.head
        key = (head[1], head[2]) if head is not None else None
        if head is None or head[0] != round_.number or key not in sent:
            problems.append(
                f"{record.describe()} got a message never sent: {head}, {record.status}"
            )
            continue
        send = sent[key]
        described = f"rank {key[0]}'s message #{key[1]} (tag {send.tag}, {send.size} B)"
        if not record.intact:
            problems.append(f"{record.describe()} got {described} damaged")
        if record.status != (key[0], send.tag, send.size):
            problems.append(f"{record.describe()} has status {record.status} for {described}")
        if not accepts(record.source, record.tag, key[0], send.tag):
            problems.append(f"{record.describe()} took {described}, which it does not accept")
        if record.probed is not None and record.probed != (key[0], send.tag, send.size):
            problems.append(f"{record.describe()}: the probe saw {record.probed}, then {described}")
        if key in owner:
            problems.append(f"{described} was received twice: {owner[key].describe()} and again")
        else:
            owner[key] = record
    for key in sorted(set(sent) - set(owner)):
        problems.append(f"rank {key[0]}'s message #{key[1]} was never received")
    for source in round_.sends:
        taken = sorted(
            ((key[1], record) for key, record in owner.items() if key[0] == source),
            key=lambda pair: pair[0],
        )
        for a, (early, early_by) in enumerate(taken):
            for late, late_by in taken[a + 1 :]:
                if late_by.number < early_by.number and accepts(
                    late_by.source, late_by.tag, source, sent[(source, early)].tag
                ):
                    problems.append(
                        f"rank {source}'s message #{late} overtook its #{early}: "
                        f"{late_by.describe()}, posted first and accepting both, took #{late} "
                        f"and the later {early_by.describe()} took #{early}"
                    )
    for record in records:
        if not record.cancelled:
            continue
        for key, other in owner.items():
            if other.number > record.number and accepts(
                record.source, record.tag, key[0], sent[key].tag
            ):
                problems.append(
                    f"{record.describe()} stayed unmatched, yet rank {key[0]}'s message "
                    f"#{key[1]}, which it accepts, went to the later {other.describe()}"
                )
    if not problems and not explained(round_, records, owner):
        problems.append(
            "no order of arrival of the senders' messages gives what the receives took: "
            + "; ".join(
                f"{r.describe()} <- {r.head[1:3] if r.head else 'cancelled'}" for r in records
            )
        )
    return problems


#: Receives whose message was there before they were made (a probe saw it first).
_ARRIVED_BEFORE = ("recv after probe", "recv after iprobe", "mprobe", "improbe")
#: Receives the receiver waited on before making its next one.
_WAITED = ("recv", "drain irecv")


def explained(round_: Round, records: list[Taken], owner: dict[tuple[int, int], Taken]) -> bool:
    """Whether some order of arrival, each source's in sending order, gives ``records``.

    MPI's matching as a search: a state is how many receives were made and
    how many messages of each source arrived; which receives wait and which
    messages are unexpected follows from it, since every message's receive
    is known. An arrival must go to the earliest waiting receive that accepts
    it, else wait unexpected, where a receive made later that accepts it and
    whose own message had not arrived would have taken it first.
    """
    sources = sorted(round_.sends)
    counts = [len(round_.sends[s]) for s in sources]
    tags = {(s, i): send.tag for s in sources for i, send in enumerate(round_.sends[s])}
    taken = [
        (r.head[1], r.head[2]) if r.head is not None and not r.cancelled else None for r in records
    ]
    seen: set[tuple[int, ...]] = set()

    def arrived(message: tuple[int, int] | None, state: tuple[int, ...]) -> bool:
        return message is not None and message[1] < state[1 + sources.index(message[0])]

    def can_arrive(state: tuple[int, ...], position: int) -> bool:
        source = sources[position]
        message = (source, state[1 + position])
        tag, mine = tags[message], owner[message].number
        made = state[0]
        for j in range(made):  # the receives waiting now, in the order they were made
            if not arrived(taken[j], state) and accepts(
                records[j].source, records[j].tag, source, tag
            ):
                return j == mine
        if mine < made:
            return False
        for j in range(made, len(records)):  # unexpected: nothing made later may want it first
            if (
                j != mine
                and accepts(records[j].source, records[j].tag, source, tag)
                and not arrived(taken[j], state)
                and mine > j
            ):
                return False
        return True

    def can_make(state: tuple[int, ...]) -> bool:
        made = state[0]
        if made == len(records):
            return False
        if records[made].kind in _ARRIVED_BEFORE and not arrived(taken[made], state):
            return False
        before = made - 1
        return not (
            before >= 0
            and records[before].kind in _WAITED
            and taken[before] is not None
            and not arrived(taken[before], state)
        )

    def search(state: tuple[int, ...]) -> bool:
        if state[0] == len(records) and list(state[1:]) == counts:
            return True
        if state in seen:
            return False
        seen.add(state)
        if can_make(state) and search((state[0] + 1, *state[1:])):
            return True
        for position in range(len(sources)):
            if state[1 + position] < counts[position] and can_arrive(state, position):
                following = list(state)
                following[1 + position] += 1
                if search(tuple(following)):
                    return True
        return False

    return search((0, *([0] * len(sources))))


def break_matching(how: str) -> None:
    """Make this process's matching wrong on purpose (the test that the checks catch it)."""
    from pmca.p2p import _matching

    if how == "newest-unexpected":  # a receive takes the latest arrival, not the first

        def newest(self: Any, source: int, tag: int) -> Any:
            found = None
            for entry in self._arrivals.values():
                if accepts(source, tag, entry.source, entry.tag):
                    found = entry
            return found

        _matching.Unexpected.first = newest  # type: ignore[method-assign]
    elif how == "specific-first":  # a specific receive beats a wildcard posted before it
        wildcard_or_specific = _matching.Posted.first

        def specific_first(self: Any, source: int, tag: int) -> Any:
            queue = self.streams.get((source, tag))
            return queue[0] if queue else wildcard_or_specific(self, source, tag)

        _matching.Posted.first = specific_first  # type: ignore[method-assign]
    else:
        raise ValueError(f"no such broken matching: {how!r}")


__all__ = [
    "Round",
    "Taken",
    "break_matching",
    "draw",
    "receive_round",
    "send_round",
    "violations",
]
