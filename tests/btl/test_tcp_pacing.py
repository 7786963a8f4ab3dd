"""btl/tcp's send pacing: how a queued message is cut into system calls."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from pmca.btl.tcp._connection import _IOV_MAX, _first_bytes


def _pieces(sizes: list[int], limit: int) -> tuple[list[bytes], bytes]:
    """Cut buffers of ``sizes`` into sends as the flush loop does; the sends and the original."""
    original = bytes(i % 251 for i in range(sum(sizes)))
    views, offset = [], 0
    for size in sizes:
        views.append(memoryview(original)[offset : offset + size])
        offset += size
    sends = []
    while views:
        piece = _first_bytes(views, limit)
        data = b"".join(bytes(v) for v in piece)
        sends.append(data)
        sent = len(data)
        while sent:  # what flush does with a count of bytes sent
            if sent >= views[0].nbytes:
                sent -= views[0].nbytes
                views.pop(0)
            else:
                views[0] = views[0][sent:]
                sent = 0
        while views and not views[0].nbytes:
            views.pop(0)
    return sends, original


@given(
    st.lists(st.integers(min_value=0, max_value=5000), min_size=1, max_size=8),
    st.integers(min_value=1, max_value=3000),
)
def test_pieces_rebuild_the_message_within_the_limit(sizes: list[int], limit: int) -> None:
    sends, original = _pieces(sizes, limit)
    assert b"".join(sends) == original
    assert all(len(send) <= limit + (limit >> 2) for send in sends)
    # Every send but the last is a full chunk (no small leftovers on their own).
    assert all(len(send) >= limit for send in sends[:-1] if len(send))


def test_no_limit_sends_everything_up_to_the_iovec_maximum() -> None:
    views = [memoryview(b"x")] * (_IOV_MAX + 3)
    assert len(_first_bytes(views, 0)) == _IOV_MAX


def test_a_short_tail_goes_with_the_last_chunk() -> None:
    header, body = memoryview(bytes(16)), memoryview(bytes(1000 + 100))
    assert [v.nbytes for v in _first_bytes([header, body], 1000)] == [16, 1100]
    assert [v.nbytes for v in _first_bytes([header, body], 800)] == [16, 784]
