"""Hypothesis draws random sizes and tags; every rank draws the same (derandomized).

Each example: every rank posts its receives in a shuffled order, sends the
drawn messages to its right neighbour, and checks that messages with the
same tag match in the order they were sent.
"""

from _common import arguments, digest, payload, report, session
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

args = arguments([("--examples", {"type": int, "default": 25})])

messages = st.lists(
    st.tuples(
        st.one_of(st.integers(0, 300), st.integers(0, 200_000), st.integers(0, 3 << 20)),
        st.integers(0, 6),
    ),
    min_size=1,
    max_size=12,
)

with session(args.btl) as s:
    p = s.p2p
    me, size = p.rank, p.size
    right, left = (me + 1) % size, (me - 1) % size
    counter = [0]

    @settings(
        derandomize=True,
        database=None,
        max_examples=args.examples,
        deadline=None,
        suppress_health_check=list(HealthCheck),
    )
    @given(messages, st.randoms(use_true_random=False))
    def exchange(plan, random):
        counter[0] += 1
        round_ = counter[0]
        order = list(range(len(plan)))
        random.shuffle(order)
        largest = {}
        for n, tag in plan:
            largest[tag] = max(n, largest.get(tag, 0))
        receives = {}
        for index in order:
            tag = plan[index][1]
            out = bytearray(largest[tag])
            receives[index] = (out, p.irecv(left, tag, out))
        sends = [
            p.isend(right, tag, payload(round_, me, i, size=n)) for i, (n, tag) in enumerate(plan)
        ]
        for request in sends:
            request.wait(timeout=120)
        # per (source, tag) the k-th posted receive gets the k-th message sent with that tag
        by_tag = {}
        for index in order:
            by_tag.setdefault(plan[index][1], []).append(index)
        sent_by_tag = {}
        for i, (_, tag) in enumerate(plan):
            sent_by_tag.setdefault(tag, []).append(i)
        for tag, posted in by_tag.items():
            for receive_index, send_index in zip(posted, sent_by_tag[tag], strict=False):
                out, request = receives[receive_index]
                n = plan[send_index][0]
                assert request.wait(timeout=120) == n
                expected = payload(round_, left, send_index, size=n)
                assert digest(bytes(out[:n])) == digest(expected), (tag, n)

    exchange()
report(True, f"{counter[0]} random exchanges")
