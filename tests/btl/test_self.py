"""p2p through the self btl in one process: sizes, buffers, ordering, truncation."""

from __future__ import annotations

import array
import ctypes
import os

import pytest

import pmca
from pmca.btl import BtlError
from pmca.p2p import TruncationError


@pytest.fixture
def session(pmca_env):
    with pmca.Session(mca={"btl": "self"}, frameworks=["btl"]) as s:
        yield s


@pytest.mark.parametrize("size", [0, 1, 8, 65_511, 65_512, 65_536, 1 << 20, (16 << 20) + 5])
def test_sizes_round_trip(session, size: int) -> None:
    data = os.urandom(size)
    out = bytearray(size)
    request = session.p2p.irecv(0, 3, out)
    session.p2p.send(0, 3, data)
    assert request.wait(timeout=30) == size
    assert out == data


def test_reach_and_world(session) -> None:
    assert session.reach(0) == ["self"]
    assert session.world.rank == 0 and session.world.size == 1
    with pytest.raises(ValueError, match="outside the world"):
        session.reach(1)


def test_buffer_kinds(session) -> None:
    numpy = pytest.importorskip("numpy")
    source = numpy.arange(10_000, dtype=numpy.float64)
    out = numpy.zeros_like(source)
    request = session.p2p.irecv(0, 1, out)
    session.p2p.send(0, 1, source)
    assert request.wait(timeout=10) == source.nbytes
    assert numpy.array_equal(out, source)
    ints = array.array("i", range(1000))
    out_ints = array.array("i", bytes(4000))
    request = session.p2p.irecv(0, 2, memoryview(out_ints))
    session.p2p.send(0, 2, ints)
    request.wait(timeout=10)
    assert out_ints == ints


def test_empty_buffers_of_any_shape(session) -> None:
    """A zero in the shape makes an empty buffer, not an error (``cast`` refuses it)."""
    numpy = pytest.importorskip("numpy")
    out = numpy.zeros((3, 0))
    request = session.p2p.irecv(0, 3, out)
    session.p2p.isend(0, 3, numpy.zeros((0, 4), numpy.int32)).wait(timeout=10)
    assert request.wait(timeout=10) == 0
    assert session.p2p.iprobe(0, 3) is None


def test_unusable_buffers_are_named(session) -> None:
    numpy = pytest.importorskip("numpy")
    with pytest.raises(ValueError, match="not C-contiguous"):
        session.p2p.isend(0, 1, numpy.zeros((10, 10))[:, 1])
    with pytest.raises(TypeError, match="read-only"):
        session.p2p.irecv(0, 1, b"immutable")
    with pytest.raises(TypeError, match="buffer protocol"):
        session.p2p.isend(0, 1, "text")


def test_matching_is_ordered_per_source_and_tag(session) -> None:
    p2p = session.p2p
    outs = [bytearray(200_000) for _ in range(6)]
    receives = [p2p.irecv(0, i % 2, outs[i]) for i in range(6)]
    sends = [p2p.isend(0, i % 2, bytes([i]) * (100 + i * 30_000)) for i in range(6)]
    for request in sends + receives:
        request.wait(timeout=10)
    for i, out in enumerate(outs):
        n = 100 + i * 30_000
        assert receives[i].nbytes == n and out[:n] == bytes([i]) * n


@pytest.mark.parametrize("size", [1000, 5 << 20])
def test_truncation_fails_both_sides_clearly(session, size: int) -> None:
    request = session.p2p.irecv(0, 9, bytearray(10))
    send = session.p2p.isend(0, 9, bytes(size))
    with pytest.raises(TruncationError, match=f"{size} bytes from rank 0 tag 9"):
        request.wait(timeout=10)
    if size > 65_536:  # rendezvous: the sender hears about it too
        with pytest.raises(TruncationError):
            send.wait(timeout=10)


def test_one_gibibyte(session) -> None:
    size = (1 << 30) + 3
    data = bytearray(size)
    marks = [0, 1 << 20, size // 2, size - 1]
    for index, position in enumerate(marks):
        data[position] = index + 1
    out = bytearray(size)
    request = session.p2p.irecv(0, 1, out)
    session.p2p.send(0, 1, data)
    assert request.wait(timeout=120) == size
    assert [out[p] for p in marks] == [1, 2, 3, 4]
    assert out.count(0, 0, 1 << 24) == (1 << 24) - 2


def test_wait_timeout_names_the_operation(session) -> None:
    request = session.p2p.irecv(0, 77, bytearray(4))
    with pytest.raises(TimeoutError, match="recv of 4 bytes from rank 0 tag 77"):
        request.wait(timeout=0.2)


def test_p2p_is_closed_after_finalize(pmca_env) -> None:
    with pmca.Session(mca={"btl": "self"}, frameworks=["btl"]) as s:
        p2p = s.p2p
        pending = p2p.irecv(0, 1, bytearray(1))
    assert pending.done and isinstance(pending.error, pmca.btl.BtlError)
    with pytest.raises(pmca.btl.BtlError, match="closed"):
        p2p.isend(0, 1, b"x")
    with pytest.raises(pmca.SessionError):
        _ = s.p2p


def test_no_btl_framework_no_data_path(pmca_env) -> None:
    with (
        pmca.Session(frameworks=["memory"]) as s,
        pytest.raises(pmca.FrameworkError, match="no data path"),
    ):
        _ = s.p2p


def test_a_put_or_get_outside_the_registration_is_refused(session) -> None:
    """A remote handle is checked before any byte moves: a malformed one, or a transfer
    leaving the registered range, is a BtlError naming the btl, the rank and the ranges."""
    (route,) = session._data_path().bml.peers[0].routes
    module, endpoint = route.module, route.endpoint
    target = bytearray(64)
    address = ctypes.addressof((ctypes.c_char * len(target)).from_buffer(target))
    handle = module.register_mem(None, address, 32)
    local = memoryview(bytearray(16))
    done: list[BaseException | None] = []
    with pytest.raises(BtlError, match=r"^btl self: malformed remote handle from rank 0"):
        module.put(endpoint, local, None, handle.base, b"short", done.append)
    with pytest.raises(
        BtlError,
        match=rf"^btl self: get of \[{handle.base + 24:#x}, \+16\) is outside rank 0's "
        rf"registration \[{handle.base:#x}, \+32\)",
    ):
        module.get(endpoint, local, None, handle.base + 24, handle.packed, done.append)
    assert not done and target == bytearray(64)
    data = memoryview(bytes(range(16)))
    module.put(endpoint, data, None, handle.base + 16, handle.packed, done.append)
    module.progress()
    assert done == [None] and target[16:32] == bytes(range(16))
    module.deregister_mem(handle)
