"""Decoding ring records: the fast path agrees with the plain one on any mix of records."""

from __future__ import annotations

import struct

from hypothesis import given
from hypothesis import strategies as st

from pmca.native._events import END_OF_MEMORY, ReleaseBatch, decode_columns, decode_fast

records = st.lists(
    st.tuples(
        st.integers(0, END_OF_MEMORY),
        st.sampled_from([0, 4096, 4096, 4096, 1 << 20, END_OF_MEMORY]),
        st.sampled_from([1, 1, 1, 2, 3, 5, 6, 99]),
        st.sampled_from([1, 1, 0]),
    ),
    max_size=40,
)


def expand(value: object, count: int) -> list[object]:
    return value if isinstance(value, list) else [value] * count


@given(records)
def test_fast_decoding_matches_plain_decoding(items: list[tuple[int, int, int, int]]) -> None:
    data = memoryview(bytearray(b"".join(struct.pack("<QQII", *item) for item in items)))
    plain = decode_columns(data)
    fast = decode_fast(data)
    assert [expand(column, len(items)) for column in fast] == [list(c) for c in plain]
    batch = ReleaseBatch(data, overflow=False)
    assert list(batch) == list(zip(*plain, strict=True))
    assert batch.addresses.tolist() == plain[0] and len(batch) == len(items)
