"""The io_uring ring's edges: 32-bit lengths, and close while another thread is in the kernel."""

from __future__ import annotations

import ctypes
import errno
import json
import mmap
import os
import subprocess
import sys
import textwrap
from collections.abc import Iterator

import pytest

from pmca.rcache.iouring import Ring, unavailable_reason
from pmca.rcache.iouring._ring import MAX_LENGTH

pytestmark = pytest.mark.skipif(unavailable_reason() is not None, reason=str(unavailable_reason()))


@pytest.fixture
def ring_with_a_page() -> Iterator[tuple[Ring, int]]:
    ring = Ring(table_size=1)
    page = mmap.mmap(-1, mmap.PAGESIZE)
    view = ctypes.c_char.from_buffer(page)
    address = ctypes.addressof(view)
    ring.register(0, address, mmap.PAGESIZE)
    try:
        yield ring, address
    finally:
        ring.close()
        del view
        page.close()


@pytest.mark.parametrize("operation", ["write_fixed", "read_fixed", "send_zc"])
def test_a_length_past_32_bits_is_refused_not_shortened(
    ring_with_a_page: tuple[Ring, int], operation: str
) -> None:
    ring, address = ring_with_a_page
    read_end, write_end = os.pipe()
    try:
        with pytest.raises(ValueError, match=rf"io_uring {operation}: length=4294967296 "):
            getattr(ring, operation)(write_end, address, MAX_LENGTH + 1, 0)
    finally:
        os.close(read_end)
        os.close(write_end)


def test_the_native_call_refuses_a_length_past_32_bits(ring_with_a_page: tuple[Ring, int]) -> None:
    ring, address = ring_with_a_page
    read_end, write_end = os.pipe()
    try:
        handle = ring._ring
        # (uint32_t)(1 << 32) is 0: a silent zero-byte write before the check.
        result = ring._lib.pmca_uring_write_fixed(handle, write_end, address, 1 << 32, 0, 0)
        assert result == -errno.EINVAL
    finally:
        os.close(read_end)
        os.close(write_end)


CLOSE_WHILE_READING = textwrap.dedent(
    """
    import ctypes, json, mmap, os, threading, time
    from pmca.rcache.iouring import Ring

    ring = Ring(table_size=1)
    page = mmap.mmap(-1, mmap.PAGESIZE)
    address = ctypes.addressof(ctypes.c_char.from_buffer(page))
    ring.register(0, address, mmap.PAGESIZE)
    read_end, write_end = os.pipe()
    got = []
    reader = threading.Thread(target=lambda: got.append(ring.read_fixed(read_end, address, 5, 0)))
    reader.start()
    time.sleep(0.5)                       # the reader waits in the kernel, GIL released
    closer = threading.Thread(target=ring.close)
    closer.start()
    time.sleep(0.5)
    waited = closer.is_alive()            # close must wait for the read in flight
    os.write(write_end, b"hello")
    reader.join(20)
    closer.join(20)
    try:
        ring.write_fixed(write_end, address, 1, 0)
        refused = ""
    except ValueError as exc:
        refused = str(exc)
    print(json.dumps({"waited": waited, "got": got, "bytes": page[:5].decode(),
                      "closed": not closer.is_alive(), "refused": refused}), flush=True)
    """
)


def test_close_waits_for_an_operation_in_flight() -> None:
    done = subprocess.run(
        [sys.executable, "-c", CLOSE_WHILE_READING],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    result = json.loads(done.stdout.splitlines()[-1])
    assert result == {
        "waited": True,
        "got": [5],
        "bytes": "hello",
        "closed": True,
        "refused": "io_uring ring is closed",
    }, result
