"""Completion notices of ``MSG_ZEROCOPY`` release exactly the send calls they name.

The notices are the kernel's ``struct sock_extended_err`` records (as
``recvmsg(MSG_ERRQUEUE)`` hands them over), written here so that each case
is exact: a range of send ids in the middle of those in flight, a notice of
another origin, a copied one. A real tcp socket holds the state (its
``SO_ZEROCOPY`` switched on); loopback completes every send as copied, so
the plain (not copied) case could not come from the kernel here.
"""

from __future__ import annotations

import gc
import socket
import struct
import weakref
from collections.abc import Iterator

import pytest

from pmca.btl.tcp._zerocopy import ZeroCopy

_ORIGIN_ZEROCOPY, _ORIGIN_ICMP = 5, 2
_COPIED = 1


def _notice(low: int, high: int, *, origin: int = _ORIGIN_ZEROCOPY, code: int = 0) -> bytes:
    """errno u32, origin u8, type u8, code u8, pad u8, info u32 (first id), data u32 (last)."""
    return struct.pack("<IBBBBII", 0, origin, 0, code, 0, low, high)


@pytest.fixture
def tcp_socket() -> Iterator[socket.socket]:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        yield sock


def _in_flight(sock: socket.socket, calls: int, *, adaptive: bool = False) -> ZeroCopy:
    zerocopy = ZeroCopy(sock, wanted=True, adaptive=adaptive)
    assert zerocopy.enabled
    for call in range(calls):
        zerocopy.sent([memoryview(bytes([call]))])
    return zerocopy


def test_a_notice_releases_only_the_ids_in_its_range(tcp_socket) -> None:
    zerocopy = _in_flight(tcp_socket, 4, adaptive=True)  # send ids 0 to 3
    zerocopy._completed(_notice(1, 2))
    assert zerocopy.pending == 2 and zerocopy.stats.completions == 2, zerocopy.stats
    zerocopy._completed(_notice(0, 3))  # 1 and 2 again: counted once
    assert zerocopy.pending == 0 and zerocopy.stats.completions == 4, zerocopy.stats
    assert zerocopy.stats.copied == 0 and zerocopy.enabled  # nothing was copied


def test_a_notice_of_another_origin_releases_nothing(tcp_socket) -> None:
    zerocopy = _in_flight(tcp_socket, 2)
    zerocopy._completed(_notice(0, 1, origin=_ORIGIN_ICMP))
    zerocopy._completed(_notice(0, 1)[:15])  # shorter than the record
    assert zerocopy.pending == 2 and zerocopy.stats.completions == 0, zerocopy.stats


@pytest.mark.parametrize("adaptive", [True, False])
def test_a_copied_notice_stops_zero_copy_only_in_auto_mode(tcp_socket, adaptive) -> None:
    zerocopy = _in_flight(tcp_socket, 1, adaptive=adaptive)
    zerocopy._completed(_notice(0, 0, code=_COPIED))
    assert zerocopy.stats.copied == 1 and zerocopy.pending == 0, zerocopy.stats
    assert zerocopy.enabled is not adaptive


def test_a_socket_without_zero_copy_is_never_asked_for_it() -> None:
    first, second = socket.socketpair()  # AF_UNIX: SO_ZEROCOPY is not supported
    with first, second:
        assert not ZeroCopy(first, wanted=True, adaptive=False).enabled


def test_zero_copy_is_asked_for_only_when_wanted_and_until_the_kernel_refuses(
    tcp_socket,
) -> None:
    assert not ZeroCopy(tcp_socket, wanted=False, adaptive=False).enabled
    zerocopy = ZeroCopy(tcp_socket, wanted=True, adaptive=False)
    assert zerocopy.enabled
    zerocopy.out_of_memory()  # ENOBUFS: plain sends from now on
    assert not zerocopy.enabled


class _Buffer(bytearray):
    """A bytearray that can be watched with a weak reference."""


def test_buffers_in_flight_when_the_socket_closes_are_never_released(tcp_socket) -> None:
    buffer = _Buffer(b"in flight")
    watch = weakref.ref(buffer)
    zerocopy = ZeroCopy(tcp_socket, wanted=True, adaptive=False)
    zerocopy.sent([memoryview(buffer)])
    zerocopy.release()  # no notice came: the kernel may still read it
    assert zerocopy.pending == 0
    del buffer, zerocopy
    gc.collect()
    assert watch() is not None, "a buffer the kernel may read was given back"
