"""mpi_yield_when_idle: when a waiting rank yields its core."""

from __future__ import annotations

import pmca
from pmca.p2p._idle import _count_cpus, host_cores, should_yield


def test_cpu_lists_are_counted() -> None:
    assert _count_cpus("0-3,8,10-11\n") == 7
    assert _count_cpus("5") == 1


def test_auto_yields_only_when_ranks_outnumber_cores() -> None:
    cores = host_cores()
    assert not should_yield(-1, cores)
    assert should_yield(-1, cores + 1)
    assert should_yield(1, 1)
    assert not should_yield(0, cores + 1)


def test_the_parameter_is_registered_as_auto_bool() -> None:
    with pmca.Session(mca={"btl": "self"}, frameworks=["btl"]) as s:
        assert s.param("mpi_yield_when_idle").value == -1
    with pmca.Session(mca={"btl": "self", "mpi_yield_when_idle": "yes"}, frameworks=["btl"]) as s:
        assert s.param("mpi_yield_when_idle").value == 1
