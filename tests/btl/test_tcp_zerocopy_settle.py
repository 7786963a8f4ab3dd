"""A deregistration waits as long as the kernel may still read zero-copy pages.

This process's tcp module puts 16 MiB with ``MSG_ZEROCOPY`` to a pretend
rank 1 (a socket of this test) that reads nothing, so the kernel keeps
pages of the put in flight and sends no completion for them; then the
registration is dropped in a thread. It must not return while completions
are missing: it used to give up after 5 s and leave the pages to be reused
under a transmission. A log line says that it waits; once rank 1 reads, the
completions come and it returns.
"""

from __future__ import annotations

import threading
import time
from contextlib import suppress

import pytest

from pmca.btl.tcp import _wire as wire
from pmca.btl.tcp._module import SETTLE_PATIENCE
from pmca.p2p._buffers import address_of

from ._tcp_peer import connected_peers, progress_until

MCA = {
    "btl": "self,tcp",
    "btl_tcp_if_include": "127.0.0.1/8",
    "btl_tcp_zerocopy": "true",
    "btl_tcp_zerocopy_threshold": "64k",
    "pmca_base_modex_timeout": 60,
    "btl_base_verbose": 20,  # warnings shown
}
SIZE = 16 << 20


def test_a_deregistration_waits_for_every_zero_copy_completion(pmca_env, capfd) -> None:
    with connected_peers(MCA, peers=1) as (tcp, (endpoint,), (rank1,)):
        data = bytearray(b"\x5a" * SIZE)
        handle = tcp.register_mem(None, address_of(memoryview(data)), SIZE)
        remote = wire.HANDLE.pack(b"\0" * 8, 1, 0x1000, SIZE)
        tcp.put(endpoint, memoryview(data), handle, 0x1000, remote, lambda _error: None)
        connection = tcp.connections()[1]
        progress_until(tcp, lambda: tcp.zerocopy_stats().sends, seconds=5)
        if not tcp.zerocopy_stats().sends:
            pytest.skip("this kernel sends nothing with MSG_ZEROCOPY")
        progress_until(tcp, lambda: False, seconds=0.2)  # what the peer took is reported
        assert connection.zerocopy.pending, "the kernel completed sends rank 1 never read"
        returned = threading.Event()

        def deregister() -> None:
            tcp.deregister_mem(handle)
            returned.set()

        thread = threading.Thread(target=deregister, daemon=True)
        thread.start()
        gave_up = returned.wait(SETTLE_PATIENCE + 1.5)
        held = connection.zerocopy.pending
        rank1.settimeout(0.05)
        deadline = time.monotonic() + 60
        while not returned.is_set() and time.monotonic() < deadline:
            with suppress(TimeoutError):
                rank1.recv(1 << 20)  # the kernel sends the rest: its completions come
        thread.join(5)
        assert not gave_up, f"deregistered while the kernel held {held} zero-copy sends"
        assert returned.is_set(), "the deregistration never returned once rank 1 read"
        assert connection.zerocopy.pending == 0
        # and the wait said why it was long
        assert "waits for the kernel to finish zero-copy sends" in capfd.readouterr().err
