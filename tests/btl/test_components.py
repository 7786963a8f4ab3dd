"""The btl framework's components: limits from parameters, isolation, unloading, info, doctor."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

import pmca
from pmca.btl import BtlModule, Flags
from pmca.cli._btl_loopback import check
from pmca.mca.params import ParamValueError
from pmca.testing import run_python
from tests.runtime.test_data_path import GatheringWorld


def test_modules_implement_the_interface(pmca_env) -> None:
    with pmca.Session(mca={"btl": "self,tcp"}, frameworks=["btl"]) as s:
        modules = s.modules("btl")
        assert [m.name for m in modules] == ["self", "tcp"]  # by exclusivity
        for module in modules:
            assert isinstance(module, BtlModule)
            assert module.limits.flags & Flags.SEND and module.limits.flags & Flags.GET


def test_limits_come_from_the_parameters(pmca_env) -> None:
    mca = {"btl": "self,tcp", "btl_tcp_eager_limit": "4k", "btl_tcp_exclusivity": 7}
    with pmca.Session(mca=mca, frameworks=["btl"]) as s:
        tcp = next(m for m in s.modules("btl") if m.name == "tcp")
        assert tcp.limits.eager_limit == 4096 and tcp.limits.exclusivity == 7
        assert s.param("btl_tcp_eager_limit").value == 4096


def test_contradictory_limits_are_refused_at_init_naming_them(pmca_env) -> None:
    # Once dropped at query with a log line ("no btl reaches rank N" later).
    mca = {"btl": "self,tcp", "btl_tcp_eager_limit": "1m", "btl_tcp_max_send_size": "64k"}
    with pytest.raises(ParamValueError) as refused:
        pmca.Session(mca=mca, frameworks=["btl"]).init()
    message = str(refused.value)
    assert "'btl_tcp_eager_limit'" in message, message
    assert "= 1048576 exceeds btl_tcp_max_send_size = 65536" in message, message


_FIFO = "valid values: a power of two from 2 to 1048576"
_SM_SIZE = "valid values: 1 to 1073741824 bytes"
_SIZE = "valid values: 1 to 2147483647 bytes"


@pytest.mark.parametrize(
    ("name", "value", "expected"),
    [
        ("btl_tcp_keepalive_probes", 500, "500 is above 127; valid values: 1 to 127 probes"),
        ("btl_tcp_keepalive_interval", 0, "0 is below 1; valid values: 1 to 32767 seconds"),
        ("btl_tcp_keepalive_time", -1, "-1 is below 0; valid values: 0 to 32767 seconds"),
        (
            "btl_tcp_zerocopy",
            "maybe",
            "not one of the accepted words; valid values: one of true, false, auto",
        ),
        (
            "btl_sm_fifo_size",
            1000,
            "1000 is not a power of two; valid values: a power of two from 2 to 1048576",
        ),
        ("btl_sm_eager_fragments", 0, "0 is below 1; valid values: 1 to 65536"),
        ("btl_vader_max_fragments", 0, "0 is below 1; valid values: 1 to 65536"),
        ("btl_sm_fifo_size", 2**28, f"268435456 is above 1048576; {_FIFO}"),
        # Committed and touched up front: 2**31 entries were 32 GiB per rank.
        # 32-bit fields: once truncated to 64, or "cannot create the sm segment".
        (
            "btl_sm_eager_fragments",
            4294967360,
            "4294967360 is above 65536; valid values: 1 to 65536",
        ),
        ("btl_sm_fifo_size", 2**32, f"4294967296 is above 1048576; {_FIFO}"),
        ("btl_sm_max_send_size", 2**32, f"4294967296 is above 1073741824; {_SM_SIZE}"),
        ("btl_tcp_max_send_size", 2**32, f"4294967296 is above 2147483647; {_SIZE}"),
        ("btl_sm_max_fragments", 65536, "btl_sm_max_fragments); valid values: 1 to 65536"),
        # Once dropped at query, then "no btl reaches rank N".
        ("btl_self_exclusivity", -1, "-1 is below 0; valid values: 0 to 2147483647"),
        ("btl_sm_eager_limit", 0, "0 is below 1; valid values: 1 to 1073741824 bytes"),
        ("btl_sm_eager_limit", 65536, f"= 65536 exceeds btl_sm_max_send_size = 32768; {_SM_SIZE}"),
        ("btl_tcp_bulk_chunk", 1, "1 is below 1024; valid values: 0 or 1024 to 2147483647 bytes"),
        (
            "btl_tcp_send_queue_limit",
            -1,
            "-1 is out of range [0, 18446744073709551615]; valid values: 0 to 2147483647 bytes",
        ),
        (
            "btl_tcp_send_queue_limit",
            2**32,
            "4294967296 is above 2147483647; valid values: 0 to 2147483647 bytes",
        ),
        ("btl_base_wait_spin", "-inf", "-inf is below 0; valid values: 0 to 604800 s"),
        ("btl_base_wait_spin", "\u0663", "(ASCII digits); valid values: 0 to 604800 s"),
        ("rcache_grdma_pending_max", 0, "0 is below 1; valid values: 1 to 2147483647"),
    ],
)
@pytest.mark.parametrize("ranks", [1, 2])
def test_a_bad_btl_value_is_refused_at_init_naming_it(
    pmca_env, name, value, expected, ranks
) -> None:
    # Refused where it is given, in any world: a world of one rank, which
    # queries its btls only at first use, must not accept it at init.
    world = GatheringWorld(ranks, blobs=[b""] * ranks)
    session = pmca.Session(mca={"btl": "self,sm,tcp", name: value}, world=world)
    with pytest.raises(ParamValueError) as refused:
        session.init()
    message = str(refused.value)
    assert f"invalid value '{value}' for MCA parameter" in message, message
    assert f"'{name}'" in message, message
    assert message.endswith(expected), message
    valid = expected.partition("; valid values: ")[2]
    assert message.count(valid) == 1, message  # said once, not in the reason again
    assert world.allgathers == 0


def test_interface_selection(pmca_env) -> None:
    with pmca.Session(mca={"btl": "tcp", "btl_tcp_if_include": "lo"}, frameworks=["btl"]) as s:
        (tcp,) = s.modules("btl")
        # lo's IPv4 and (where configured) IPv6 addresses
        assert {i.name for i in tcp.settings.interfaces} == {"lo"}
    with pmca.Session(
        mca={"btl": "self,tcp", "btl_tcp_if_include": "nosuch0"}, frameworks=["btl"]
    ) as s:
        assert [m.name for m in s.modules("btl")] == ["self"]
    with pmca.Session(
        mca={"btl": "self,tcp", "btl_tcp_if_include": "lo", "btl_tcp_if_exclude": "lo"},
        frameworks=["btl"],
    ) as s:
        (failure,) = s.failures("btl")
        assert "mutually exclusive" in failure.message


def test_a_third_party_btl_that_fails_is_isolated(install_plugin, pmca_env) -> None:
    install_plugin(
        "pmca-broken-btl",
        entry_points={"pmca.btl": {"broken": "pmca_broken_btl:Broken"}},
        modules={
            "pmca_broken_btl": """
                import pmca

                class Broken(pmca.Component):
                    framework = "btl"
                    name = "broken"

                    @pmca.hookimpl
                    def query(self, ctx):
                        raise RuntimeError("no hardware here")
            """
        },
    )
    with pmca.Session(mca={"btl": "self,broken"}, frameworks=["btl"]) as s:
        assert s.reach(0) == ["self"]
        (failure,) = s.failures("btl")
        assert failure.component == "broken" and "no hardware here" in failure.message
        out = bytearray(3)
        request = s.p2p.irecv(0, 1, out)
        s.p2p.send(0, 1, b"abc")
        assert request.wait(timeout=10) == 3


def test_tcp_between_two_processes() -> None:
    result = check("tcp", timeout=60)
    assert result.ok, result.detail


_DSO_CHILD = """
import os, sys
import pytest

import pmca

from pmca.testing import mapped_files, open_sockets as sockets

def maps():
    return mapped_files("/pmca/btl/")

before = sockets()
for round_ in range(2):
    with pmca.Session(mca={"btl": "self,tcp"}, frameworks=["btl"]) as s:
        assert sockets() == before, "a world of one rank listened before any use"
        assert [m.name for m in s.modules("btl")] == ["self", "tcp"]
        assert len(sockets()) > len(before), "tcp listens on a socket"
        loaded = [name for name in sys.modules if name.startswith("pmca.btl.tcp")]
        assert loaded, "tcp is imported while open"
    leftover = [name for name in sys.modules if name.startswith("pmca.btl.tcp")]
    assert sockets() == before, f"round {round_}: sockets left open: {sockets() - before}"
    assert not leftover, f"round {round_}: modules left loaded: {leftover}"
    assert not maps(), f"round {round_}: native libraries still mapped: {maps()}"
print("unloaded")
"""


def test_dso_mode_really_unloads_tcp(pmca_env) -> None:
    child = run_python(_DSO_CHILD, env={"PMCA_MCA_mca_base_component_dso": "all"}, timeout=120)
    assert child.returncode == 0, child.stderr
    assert "unloaded" in child.stdout


def test_info_shows_btl_limits_as_ompi_info_does() -> None:
    info = subprocess.run(
        [
            sys.executable,
            "-m",
            "pmca.cli",
            "info",
            "--param",
            "btl",
            "all",
            "--level",
            "9",
            "--parsable",
        ],
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    ).stdout
    for component in ("self", "tcp"):
        for limit in ("exclusivity", "latency", "bandwidth", "eager_limit", "max_send_size"):
            assert f"mca:btl:{component}:param:btl_{component}_{limit}:value:" in info
    assert "mca:btl:tcp:param:btl_tcp_if_include:value:" in info
    assert "mca:btl:base:param:btl_base_verbose:value:" in info


def test_doctor_checks_every_btl() -> None:
    from pmca.cli._doctor_btl import btl_sections

    section = btl_sections()[0]  # pmca's own btls (third-party ones have their own section)
    verdicts = {check.name: check.status for check in section.checks}
    assert {"btl self", "btl tcp"} <= verdicts.keys(), section.render()
    assert set(verdicts.values()) == {"ok"}, section.render()
    assert json.dumps(section.data)


def test_leave_pinned_caches_registrations_in_grdma(pmca_env) -> None:
    from pmca import memory

    with pmca.Session(mca={"btl": "self,tcp", "mpi_leave_pinned": 1}) as s:
        if not memory.support_level() & memory.MUNMAP:
            pytest.skip("no memory hooks on this machine")
        tcp = next(m for m in s.modules("btl") if m.name == "tcp")
        assert tcp._registrations.cached
        buffer = bytearray(1 << 20)
        from pmca.p2p._buffers import address_of

        address = address_of(memoryview(buffer))
        for _ in range(3):
            handle = tcp.register_mem(None, address, len(buffer))
            tcp.deregister_mem(handle)
        stats = tcp._registrations._cache.stats()
        assert stats.hits >= 2, stats


def test_without_leave_pinned_every_transfer_registers(pmca_env) -> None:
    with pmca.Session(mca={"btl": "self,tcp", "mpi_leave_pinned": 0}) as s:
        tcp = next(m for m in s.modules("btl") if m.name == "tcp")
        assert not tcp._registrations.cached


def test_tcp_zero_copy_sends_when_asked() -> None:
    result = check(
        "tcp", timeout=60, mca={"btl_tcp_zerocopy": "true", "btl_tcp_zerocopy_threshold": "64k"}
    )
    assert result.ok, result.detail
    assert "zero-copy sends" in result.detail, result.detail
    plain = check("tcp", timeout=60, mca={"btl_tcp_zerocopy": "false"})
    assert plain.ok and "zero-copy" not in plain.detail, plain.detail
