"""Seed scenario 4: a registration cache without hooks sends a freed buffer's pinned pages."""

from __future__ import annotations

import ctypes
import socket

import pytest

from pmca._libc import PAGE, libc
from pmca._sockets import recv_exactly
from pmca.rcache.iouring import IoUringBackend, unavailable_reason
from pmca.scenarios import stale_registration

pytestmark = [
    pytest.mark.usefixtures("native_backend"),
    pytest.mark.skipif(unavailable_reason() is not None, reason=str(unavailable_reason())),
]


def test_io_uring_moves_the_pinned_pages_not_what_the_address_maps() -> None:
    # What makes a stale registration dangerous, with no cache at all: the
    # kernel keeps A's pages after the user unmaps A and maps B there.
    backend = IoUringBackend(table_size=4)
    length = 4 * PAGE
    a = stale_registration._map(length)
    ctypes.memset(a, ord("A"), length)
    handle = backend.register(a, length)
    stale_registration._unmap(a, length)
    b = stale_registration._map(length, at=a)
    ctypes.memset(b, ord("B"), length)
    sender, receiver = socket.socketpair()
    try:
        assert backend.write_fixed(sender.fileno(), b, length, handle) == length
        assert recv_exactly(receiver, length, "the pages") == b"A" * length
    finally:
        backend.deregister(handle)
        backend.close()
        libc().munmap(b, length)
        sender.close()
        receiver.close()


def test_send_zc_sends_from_the_registration() -> None:
    backend = IoUringBackend(table_size=4)
    length = 8 * PAGE
    buffer = stale_registration._map(length)
    ctypes.memset(buffer, ord("Z"), length)
    handle = backend.register(buffer, length)
    server = socket.create_server(("127.0.0.1", 0))
    client = socket.create_connection(server.getsockname())
    peer, _ = server.accept()
    try:
        assert backend.send_zc(client.fileno(), buffer, length, handle) == length
        assert recv_exactly(peer, length, "the pages") == b"Z" * length
    finally:
        backend.deregister(handle)
        backend.close()
        libc().munmap(buffer, length)
        for sock in (client, peer, server):
            sock.close()


def test_without_hooks_the_receiver_gets_a_and_with_them_b() -> None:
    rows = stale_registration.run(threaded=False)
    without, with_hooks = rows
    assert without.outcome == "reproduced", without.detail
    assert "'AAAA'" in without.detail
    assert with_hooks.outcome == "prevented", with_hooks.detail
    assert "'BBBB'" in with_hooks.detail


def test_threaded_no_wrong_byte_with_pmca_over_ten_thousand_sends() -> None:
    rows = stale_registration.run(iterations=10_000)
    threaded_without, threaded_with = rows[2:]
    assert threaded_without.outcome == "reproduced", threaded_without.detail
    assert threaded_with.outcome == "prevented", threaded_with.detail
    assert int(threaded_with.detail.split(" sends")[0]) >= 10_000, threaded_with.detail
    assert " 0 wrong bytes" in threaded_with.detail
