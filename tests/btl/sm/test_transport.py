"""The sm transport between real processes: FIFO, fragments, wake-up, CMA."""

from __future__ import annotations

import array
import contextlib
import ctypes
import errno
import hashlib
import os
import random
import resource
import select
import struct
import time
import tracemalloc

import pytest

pytestmark = pytest.mark.skipif(not os.path.exists("/proc/self/fd"), reason="needs Linux /proc")


def connect(transport, spawn, peers=1, *, allow_getfd=True, **config):
    """Rank 0 here, ranks 1..peers in children, every segment mapped by all."""
    slots = peers + 1
    here = transport(**config)
    children = [spawn() for _ in range(peers)]
    addresses = {0: here.address}
    for rank, child in enumerate(children, start=1):
        addresses[rank] = child.call("create", config)
    here.bind(0, slots)
    for rank, child in enumerate(children, start=1):
        child.call("bind", rank, slots)
        for other, address in addresses.items():
            if other != rank:
                child.call("attach", other, address, allow_getfd)
        here.attach(rank, addresses[rank], allow_getfd=allow_getfd)
    return here, children, addresses


def exchange(here, destination, messages, timeout=60.0):
    """Send ``messages`` (tag, payload) and collect as many echoes, interleaved."""
    received = []
    pending = list(messages)
    deadline = time.monotonic() + timeout
    while pending or len(received) < len(messages):
        assert time.monotonic() < deadline, f"only {len(received)} of {len(messages)} echoes"
        if pending and here.send(destination, pending[0][0], b"", pending[0][1]):
            pending.pop(0)
            continue
        message = here.poll()
        if message is None:
            here.wait(0.01 if pending else 1.0)
            continue
        source, tag, data = message
        received.append((source, tag, bytes(data)))
    here.release()
    return received


def test_every_fragment_size_round_trips_with_its_checksum(transport, spawn):
    here, (child,), _ = connect(transport, spawn)
    sizes = [0, 1, 7, 8, 63, 64, 4095, 4096, 4097, 16384, 32767, 32768]
    rng = random.Random(10)
    messages = [(tag, rng.randbytes(size)) for tag, size in enumerate(sizes * 20)]
    child.start("echo", len(messages))
    echoes = exchange(here, 1, messages)
    assert child.answer() is None
    assert [(tag, hashlib.sha256(p).digest()) for tag, p in messages] == [
        (tag, hashlib.sha256(p).digest()) for _, tag, p in echoes
    ]
    assert {source for source, _, _ in echoes} == {1}


def test_every_kind_of_body_arrives_as_its_bytes(transport, spawn):
    """Bodies of any format and shape, read-only or not, around the 4 KiB up to
    which a send stages its body, arrive as their bytes in C order; a body
    that is not contiguous is refused, naming why."""
    here, (child,), _ = connect(transport, spawn)
    rng = random.Random(12)
    bodies = [
        bytearray(rng.randbytes(4095)),
        bytearray(rng.randbytes(4096)),
        memoryview(rng.randbytes(4096)),  # read-only
        array.array("d", (rng.random() for _ in range(512))),  # 4096 bytes of doubles
        array.array("i", range(100)),
        memoryview(bytearray(rng.randbytes(1024))).cast("B", [32, 32]),  # two dimensions
        memoryview(bytearray(rng.randbytes(4096))).cast("I"),
        bytearray(rng.randbytes(4097)),
        memoryview(rng.randbytes(16384)),
        array.array("d", (rng.random() for _ in range(2048))),
        bytearray(rng.randbytes(32767)),
    ]
    child.start("echo", len(bodies))
    echoes = exchange(here, 1, list(enumerate(bodies)))
    assert child.answer() is None
    assert [(tag, data) for _, tag, data in echoes] == [
        (tag, memoryview(body).tobytes()) for tag, body in enumerate(bodies)
    ]
    with pytest.raises(ValueError, match="contiguous"):
        here.send(1, 0, b"", memoryview(bytearray(64))[::2])


def test_a_small_read_only_body_is_staged_not_copied_to_a_new_object(transport, spawn):
    """Up to 4 KiB the body goes through the transport's staging area: a read-only
    one is not first copied to new bytes (which the general way does)."""
    here, _, _ = connect(transport, spawn)
    for size in (1, 4096):
        body = memoryview(bytes(size))
        tracemalloc.start()
        try:
            assert here.send(1, 1, b"", body)  # nobody reads: it waits in rank 1's FIFO
            assert here.send(1, 1, b"", body)
            tracemalloc.reset_peak()
            before = tracemalloc.get_traced_memory()[0]
            assert here.send(1, 1, b"", body)
            grown = tracemalloc.get_traced_memory()[1] - before
        finally:
            tracemalloc.stop()
        assert grown < 1024, f"a send of {size} bytes allocated {grown} bytes"


def test_head_and_body_arrive_as_one_message_and_oversize_is_refused(transport, spawn):
    here, (child,), _ = connect(transport, spawn)
    child.start("echo", 1)
    assert here.send(1, 5, b"head:", bytearray(b"body"))
    deadline = time.monotonic() + 30
    while (message := here.poll()) is None:
        assert time.monotonic() < deadline
        here.wait(1.0)
    assert message[1] == 5 and bytes(message[2]) == b"head:body"
    here.release()
    assert child.answer() is None
    with pytest.raises(ValueError, match="exceeds max_send_size 32768"):
        here.send(1, 0, b"h", bytes(32768))


def test_many_producers_share_one_fifo_in_order_per_source(transport, spawn):
    here, children, _ = connect(transport, spawn, peers=3, fifo_capacity=64, eager_count=8)
    count = 600
    for rank, child in enumerate(children, start=1):
        child.start("send", 0, [(rank, i.to_bytes(4, "little") * rank) for i in range(count)])
    seen = {rank: [] for rank in (1, 2, 3)}
    deadline = time.monotonic() + 60
    while sum(map(len, seen.values())) < 3 * count:
        assert time.monotonic() < deadline, {r: len(s) for r, s in seen.items()}
        message = here.poll()
        if message is None:
            here.wait(1.0)
            continue
        source, tag, data = message
        assert tag == source
        seen[source].append(int.from_bytes(bytes(data[:4]), "little"))
    here.release()
    for child in children:
        assert child.answer() is None
    assert all(values == list(range(count)) for values in seen.values())
    assert here.stats()["received"] == 3 * count


def test_a_lane_takes_its_sends_fin_and_hands_every_other_message_on(
    transport, spawn, sm_transport
):
    """``await_fin`` answers 2 + status for the FIN of its own send from its peer on its
    active-message tag, and hands on, in FIFO order, whatever else comes first."""
    here, (child,), _ = connect(transport, spawn)
    am_tag = 7
    calls = here.lane_calls(1, am_tag)
    delivery = sm_transport._Delivery()

    def await_fin(send_id: int) -> int:
        return calls.await_fin(calls.context, ctypes.byref(delivery), calls.lane, send_id)

    def fin(status: int, send_id: int) -> bytes:
        return struct.pack("<BxxxIQ", 4, status, send_id)

    messages = [
        (am_tag, fin(0, 41)),  # another send's FIN
        (am_tag + 1, fin(0, 42)),  # another active-message tag
        (am_tag, fin(0, 42) + b"x"),  # not a FIN's length
        (am_tag, struct.pack("<BxxxIQ", 1, 0, 42)),  # another kind
        (am_tag, fin(1, 42)),  # its FIN: truncated
        (am_tag, fin(0, 1 << 40)),  # a 64-bit send id
    ]
    assert child.call("send", 0, messages) is None
    here.set_lane_spin(5.0)  # everything is queued already: no spin is needed
    for tag, data in messages[:4]:
        assert await_fin(42) == 1
        assert (delivery.source, delivery.tag, delivery.length) == (1, tag, len(data))
    assert await_fin(42) == 2 + 1
    assert await_fin(1 << 40) == 2
    received = here.stats()["lane_received"]
    here.set_lane_spin(0.001)
    assert await_fin(43) == 0  # nothing came
    assert here.stats()["lane_received"] == received == 2


@pytest.mark.parametrize("size", [0, 1, 4096, 1 << 20, 64 << 20])
def test_cma_reads_and_writes_a_peer_buffer_in_one_copy(transport, spawn, size, sm_transport):
    here, (child,), _ = connect(transport, spawn)
    remote, digest = child.call("buffer", size, size)
    local = bytearray(size)
    address, _, _keep = sm_transport.buffer_address(local)
    here.cma(child.pid, write=False, local=address, remote=remote, length=size)
    assert hashlib.sha256(local).hexdigest() == digest
    rng = random.Random(-size)
    local[:] = rng.randbytes(size)
    here.cma(child.pid, write=True, local=address, remote=remote, length=size)
    assert child.call("digest") == hashlib.sha256(local).hexdigest()


def test_cma_names_the_peer_and_range_it_could_not_read(transport, spawn, sm_transport):
    here, (child,), _ = connect(transport, spawn)
    local = bytearray(16)
    address, _, _keep = sm_transport.buffer_address(local)
    with pytest.raises(
        sm_transport.TransportError, match=f"process_vm_readv from pid {child.pid}"
    ) as info:
        here.cma(child.pid, write=False, local=address, remote=8, length=16)
    assert info.value.errno == errno.EFAULT


def test_cma_probe_reads_the_peer_magic(transport, spawn):
    here, _, addresses = connect(transport, spawn)
    assert here.cma_refusal(addresses[1]) == 0


def test_proc_fd_fallback_maps_the_same_segment(transport, spawn):
    here, (child,), _ = connect(transport, spawn, allow_getfd=False)
    child.start("echo", 1)
    assert here.send(1, 9, b"", b"via /proc")
    deadline = time.monotonic() + 30
    while (message := here.poll()) is None:
        assert time.monotonic() < deadline
        here.wait(1.0)
    assert bytes(message[2]) == b"via /proc"
    here.release()
    assert child.answer() is None


def test_attach_rejects_what_is_not_a_segment_of_that_peer(transport, spawn, sm_transport):
    here = transport(0, 3)
    child = spawn()
    address = child.call("create", {})
    # an fd of the child that is not its segment (its stdin pipe)
    with pytest.raises(
        sm_transport.TransportError, match=r"peer 1 .* not a pmca sm segment of this version"
    ):
        here.attach(1, sm_transport.SegmentAddress(child.pid, 0, address.wake_fd, address.size, 0))
    # the right segment claimed by another process
    foreign = sm_transport.SegmentAddress(os.getpid(), address.fd, address.wake_fd, address.size, 0)
    with pytest.raises(sm_transport.TransportError, match=r"peer 2 \("):
        here.attach(2, foreign)
    assert not here.attached(1) and not here.attached(2)


def test_a_killed_peer_is_noticed_and_leaves_nothing_in_dev_shm(transport, spawn, sm_transport):
    before = set(os.listdir("/dev/shm")) if os.path.isdir("/dev/shm") else set()
    here, (child,), addresses = connect(transport, spawn, eager_count=4, max_count=1)
    assert here.alive(1)
    child.kill()
    deadline = time.monotonic() + 30
    while here.alive(1):
        assert time.monotonic() < deadline, "a killed peer still looks alive"
        time.sleep(0.01)
    # a wait with nobody left to send returns at its timeout instead of hanging
    assert here.wait(0.05) is False
    # its segment is still mapped here, so late sends do not fault; they use
    # up our fragments (4 eager, then the 1 large), which nobody frees
    assert [here.send(1, 0, b"", b"into the void") for _ in range(6)] == [True] * 5 + [False]
    here.detach(1)
    # detaching a dead peer takes its fragments back
    assert here.send(0, 0, b"", b"to myself")
    with pytest.raises(sm_transport.TransportError, match="cannot map the sm segment of peer 1"):
        here.attach(1, addresses[1])
    after = set(os.listdir("/dev/shm")) if os.path.isdir("/dev/shm") else set()
    assert after <= before


def test_a_blocked_receiver_sleeps_and_is_woken(transport, spawn):
    here, (child,), _ = connect(transport, spawn)
    start = resource.getrusage(resource.RUSAGE_SELF)
    assert here.wait(0.5, spins=1000) is False
    used = resource.getrusage(resource.RUSAGE_SELF)
    cpu = (used.ru_utime - start.ru_utime) + (used.ru_stime - start.ru_stime)
    assert cpu < 0.25, f"an idle wait of 0.5 s burned {cpu:.2f} s of CPU"
    child.start("send", 0, [(1, b"wake up")])
    assert here.wait(30.0) is True
    assert child.answer() is None
    assert here.poll() is not None
    here.release()


def test_an_armed_receiver_is_woken_through_its_eventfd(transport, spawn):
    here, (child,), _ = connect(transport, spawn)
    assert here.arm() is False
    readable, _, _ = select.select([here.wake_fd], [], [], 0)
    assert readable == []
    child.start("send", 0, [(2, b"select me")])
    readable, _, _ = select.select([here.wake_fd], [], [], 30)
    assert readable == [here.wake_fd]
    assert child.answer() is None
    here.disarm()
    assert select.select([here.wake_fd], [], [], 0)[0] == []
    assert here.poll() is not None
    here.release()
    # arming with a message already queued reports it at once
    child.call("send", 0, [(2, b"already here")])
    assert here.arm() is True
    assert select.select([here.wake_fd], [], [], 0)[0] == [here.wake_fd]
    here.disarm()


def test_close_unmaps_segments_and_closes_descriptors(transport, spawn, sm_transport):
    def memfds():
        found = 0
        for fd in os.listdir("/proc/self/fd"):
            with contextlib.suppress(OSError):
                found += "pmca-btl-sm" in os.readlink(f"/proc/self/fd/{fd}")
        return found

    def mapped():
        with open("/proc/self/maps") as maps:
            return sum("pmca-btl-sm" in line for line in maps)

    base_fds, base_maps = memfds(), mapped()
    here, _, _ = connect(transport, spawn)
    assert memfds() > base_fds and mapped() >= base_maps + 2
    here.close()
    here.close()
    assert memfds() == base_fds and mapped() == base_maps
    with pytest.raises(sm_transport.TransportError, match="closed"):
        here.poll()


def test_a_segment_s_sizes_are_checked_at_their_bounds(sm_transport):
    config = sm_transport.TransportConfig
    config(fifo_capacity=2, eager_size=1, eager_count=1, max_count=1)  # the smallest
    config(eager_size=32768, max_size=32768)  # eager fragments as large as the others
    for wrong, named in (
        ({"fifo_capacity": 1}, "fifo_capacity must be a power of two >= 2, not 1"),
        ({"fifo_capacity": 96}, "fifo_capacity must be a power of two >= 2, not 96"),
        ({"eager_size": 0}, "need 0 < eager_size <= max_size, got 0 and 32768"),
        ({"eager_size": 32769}, "need 0 < eager_size <= max_size, got 32769 and 32768"),
        ({"eager_count": 0}, "each fragment pool needs at least one fragment"),
        ({"max_count": 0}, "each fragment pool needs at least one fragment"),
    ):
        with pytest.raises(ValueError, match=named):
            config(**wrong)


def test_per_peer_counters_are_read_in_place_and_zero_beyond_the_peers(
    transport, spawn, sm_transport
):
    # This process is rank 1: its counters for rank 0 start the array.
    here, child = transport(), spawn()
    address = child.call("create", {})
    here.bind(1, 2)
    child.call("bind", 0, 2)
    child.call("attach", 1, here.address, True)
    via = here.attach(0, address)
    here.detach(0)
    assert here.attach(0, address, allow_getfd=True) == via  # pidfd_getfd is tried by default
    child.start("echo", 2)
    assert sorted(exchange(here, 0, [(5, b"abc"), (6, b"defgh")])) == [
        (0, 5, b"abc"),
        (0, 6, b"defgh"),
    ]
    assert child.answer() is None
    assert here.count(0, "messages_sent") == here.count(0, "messages_received") == 2
    assert here.count(0, "bytes_sent") == here.count(0, "bytes_received") >= 8
    for name in sm_transport.COUNTS:  # no peer 2 in a world of two: nothing, not an error
        assert here.count(2, name) == 0


def test_a_send_names_what_it_refuses(transport, spawn):
    here, _, _ = connect(transport, spawn)
    with pytest.raises(ValueError, match="sm message of 32769 bytes exceeds max_send_size"):
        here.send(1, 0, b"h", bytes(32768))
    with pytest.raises(ValueError, match="contiguous"):
        here.send(1, 0, b"", memoryview(bytearray(64))[::2])  # small, but strided
    assert here.broken(1) is None  # a healthy peer is no fault


def test_detach_forgets_a_peer_once_and_close_runs_its_actions(transport, spawn, sm_transport):
    here, _, _ = connect(transport, spawn)
    closed = []
    here.on_close(lambda: closed.append(here.closed))
    here.detach(1)
    assert not here.attached(1)
    here.detach(1)  # not attached any more: nothing to do
    with pytest.raises(sm_transport.TransportError, match="cannot detach sm peer 0: Invalid"):
        here.detach(0)  # itself: a mistake, said
    here.close()
    here.close()
    assert closed == [False]  # once, before the context went
