"""The rules the several-senders matching test checks (``_matching_rules``), on outcomes
written by hand: what MPI allows passes, what it does not is named."""

from __future__ import annotations

import json
import random
from typing import Any

from pmca.p2p import ANY_SOURCE, ANY_TAG

from ._matching_rules import Op, Round, Send, Taken, draw, violations

A = ANY_SOURCE


def _round(sends: dict[int, list[int]]) -> Round:
    """A round of 16-byte messages with these tags per sender."""
    return Round(1, {r: [Send(t, 16, False, False) for t in tags] for r, tags in sends.items()}, [])


def _took(
    round_: Round, number: int, source: int, tag: int, message: tuple[int, int] | None
) -> Taken:
    record = Taken(number, "irecv", source, tag)
    if message is None:
        record.cancelled = True
        record.status = (source, tag, 0)
        return record
    sender, index = message
    record.status = (sender, round_.sends[sender][index].tag, 16)
    record.head = (round_.number, sender, index, 16)
    record.intact = True
    return record


def _check(sends: dict[int, list[int]], receives: list[tuple[int, int, Any]]) -> list[str]:
    round_ = _round(sends)
    records = [_took(round_, n, s, t, m) for n, (s, t, m) in enumerate(receives)]
    return violations(round_, records)


def test_an_outcome_some_order_of_arrival_gives_passes() -> None:
    # rank 2's message came first: the wildcard took it, the specific receive rank 1's
    assert _check({1: [0], 2: [0]}, [(A, ANY_TAG, (2, 0)), (1, 0, (1, 0))]) == []


def test_a_message_overtaking_one_from_its_source_is_named() -> None:
    found = _check({1: [0, 0]}, [(A, ANY_TAG, (1, 1)), (1, 0, (1, 0))])
    assert len(found) == 1 and "rank 1's message #1 overtook its #0" in found[0], found


def test_a_wildcard_passed_over_for_a_later_receive_is_named() -> None:
    found = _check({1: [0]}, [(A, 0, None), (1, 0, (1, 0))])
    assert any("stayed unmatched" in problem for problem in found), found


def test_messages_taken_twice_lost_or_not_accepted_are_named() -> None:
    found = _check({1: [0, 1]}, [(1, 0, (1, 0)), (1, ANY_TAG, (1, 0)), (2, 1, (1, 1))])
    assert any("received twice" in problem for problem in found), found
    assert any("which it does not accept" in problem for problem in found), found
    found = _check({1: [0, 1]}, [(1, 0, (1, 0))])
    assert found == ["rank 1's message #1 was never received"]


def test_an_outcome_no_order_of_arrival_gives_is_named() -> None:
    """Each rule holds on its own, but the receives need rank 2's #1 before rank 1's #0,
    which comes before rank 1's #1, before rank 2's #0, before rank 2's #1: a cycle."""
    sends = {1: [1, 0], 2: [0, 1]}
    receives = [(A, 1, (2, 1)), (A, 0, (1, 1)), (A, ANY_TAG, (1, 0)), (A, ANY_TAG, (2, 0))]
    found = _check(sends, receives)
    assert len(found) == 1 and "no order of arrival" in found[0], found
    # the same receives with rank 2's messages the other way round are fine
    swapped = [(A, 1, (2, 0)), (A, 0, (1, 1)), (A, ANY_TAG, (1, 0)), (A, ANY_TAG, (2, 1))]
    assert _check({1: [1, 0], 2: [1, 0]}, swapped) == []


def test_rounds_survive_json_and_every_rank_draws_the_same() -> None:
    first = draw(random.Random(7), 3, [1, 2, 3])
    assert draw(random.Random(7), 3, [1, 2, 3]) == first
    assert Round.from_json(json.loads(json.dumps(first.to_json()))) == first
    assert all(isinstance(op, Op) for op in first.ops)
