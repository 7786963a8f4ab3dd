"""The sm module's modex handling: what it reaches, and what it rejects."""

from __future__ import annotations

import os
import struct

import pytest
import structlog

from pmca.btl import BtlError, Flags, ModexError, Proc
from pmca.btl.base import host_id
from pmca.btl.sm._address import pack_address, pid_namespace
from pmca.btl.sm._module import DEFAULTS, SmModule
from pmca.btl.sm._transport import Transport


@pytest.fixture
def module(sm_library):
    made = SmModule(
        DEFAULTS,
        Transport(sm_library),
        structlog.get_logger(),
        mechanism="cma",
        allow_getfd=True,
    )
    yield made
    made.finalize()


def test_a_peer_on_this_host_is_reached_and_others_are_not(module, spawn):
    child = spawn()
    address = child.call("create", {})
    published = pack_address(address, pid_namespace())
    here = Proc(0, host_id(), os.getpid(), module.address(), local=True)
    procs = [
        here,
        Proc(1, host_id(), child.pid, published),
        Proc(2, "elsewhere/boot", 4242, published),
        Proc(3, host_id(), 4243, None),
    ]
    endpoints = module.add_procs(procs)
    assert endpoints[0] is None  # itself: that is btl self's job
    assert endpoints[1] is not None and endpoints[1].rank == 1
    assert endpoints[2] is None and endpoints[3] is None
    assert module.attached_via == {1: "pidfd_getfd"}
    assert module.limits.flags & Flags.GET and module.limits.flags & Flags.SINGLE_COPY
    module.del_procs([endpoints[1]])
    assert module.endpoint(1) is None


@pytest.mark.parametrize(
    ("address", "complaint"),
    [
        (b"garbage", r"rank 1 published a 7-byte address"),
        (struct.pack("<4sHHiiiQQQ", b"XXXX", 1, 0, 1, 3, 4, 8192, 0, 0), r"b'XXXX' version 1"),
        (struct.pack("<4sHHiiiQQQ", b"PMSM", 9, 0, 1, 3, 4, 8192, 0, 0), r"version 9"),
        (struct.pack("<4sHHiiiQQQ", b"PMSM", 1, 0, 77, 3, 4, 8192, 0, 0), r"names pid 77"),
    ],
    ids=["short", "foreign", "other-version", "other-pid"],
)
def test_a_malformed_or_foreign_address_is_rejected_naming_the_rank(module, address, complaint):
    procs = [
        Proc(0, host_id(), os.getpid(), module.address(), local=True),
        Proc(1, host_id(), 1, address),
    ]
    with pytest.raises(ModexError, match=complaint):
        module.add_procs(procs)


def test_none_offers_sends_only_and_emulated_offers_rdma(sm_library):
    log = structlog.get_logger()
    for mechanism, rdma in (("none", False), ("emulated", True)):
        made = SmModule(DEFAULTS, Transport(sm_library), log, mechanism=mechanism, allow_getfd=True)
        try:
            assert bool(made.limits.flags & Flags.GET) is rdma
            assert not made.limits.flags & Flags.SINGLE_COPY
            assert (made.limits.get_limit > 0) is rdma
        finally:
            made.finalize()


def test_a_put_or_get_outside_the_registration_is_refused(module, spawn):
    """A remote handle is checked before the peer's memory is touched: a malformed one,
    or a transfer leaving the registered range, is a BtlError naming the btl, the peer
    and the ranges."""
    child = spawn()
    published = pack_address(child.call("create", {}), pid_namespace())
    here = Proc(0, host_id(), os.getpid(), module.address(), local=True)
    _, endpoint = module.add_procs([here, Proc(1, host_id(), child.pid, published)])
    base = 0x7F0000001000
    handle = struct.pack("<QQQ", 1, base, 32)
    local = memoryview(bytearray(16))
    done: list[object] = []
    with pytest.raises(BtlError, match=r"^btl sm: malformed remote handle from rank 1"):
        module.get(endpoint, local, None, base, handle[:8], done.append)
    with pytest.raises(
        BtlError,
        match=rf"^btl sm: put of \[{base + 24:#x}, \+16\) is outside rank 1's "
        rf"registration \[{base:#x}, \+32\)",
    ):
        module.put(endpoint, local, None, base + 24, handle, done.append)
    assert not done
    module.del_procs([endpoint])
