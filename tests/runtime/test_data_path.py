"""A world of one rank builds its data path at first use, not at init: the modex and the
bml when its btl modules are first asked for, p2p at the first ``s.p2p``."""

from __future__ import annotations

import threading

import pytest

import pmca
from pmca.btl import ModexError
from pmca.btl.base import _modex
from pmca.runtime import RUNTIME
from pmca.session import _data
from pmca.testing import run_python


class GatheringWorld:
    """A real world of ``size`` ranks (this one rank 0) whose peers published ``blobs``.

    It counts its allgathers; with ``blobs=None`` it gathers only this
    rank's own blob, like ``pmca.world.single()``.
    """

    rank = 0
    description = "test world"

    def __init__(self, size: int, blobs: list[bytes] | None = None) -> None:
        self.size = size
        self.blobs = blobs
        self.allgathers = 0

    def allgather(self, data: bytes, *, timeout: float | None = None) -> list[bytes]:
        self.allgathers += 1
        return list(self.blobs) if self.blobs is not None else [data]

    def barrier(self, *, timeout: float | None = None) -> None:
        return None


_FIRST_USE_CHILD = """
import sys
import pmca

def loaded():
    return sorted(n for n in ("pmca.p2p", "pmca.btl.bml") if n in sys.modules)

with pmca.Session(mca={"btl": "self,tcp"}) as s:
    assert s.world is not None and s.world.size == 1, s.world
    assert loaded() == [], f"init imported the message layer: {loaded()}"
    assert s.components("btl"), "btl is open"
    assert sorted(m.name for m in s.modules("btl")) == ["self", "tcp"]
    assert loaded() == ["pmca.btl.bml"], f"asking for the modules built p2p: {loaded()}"
    assert s.reach(0) == ["self"], s.reach(0)
    assert loaded() == ["pmca.btl.bml"], f"asking which btls reach a rank imported p2p: {loaded()}"
    out = bytearray(5)
    request = s.p2p.irecv(0, 3, out)
    s.p2p.send(0, 3, b"hello")
    assert request.wait(timeout=10) == 5 and out == b"hello"
with pmca.Session(mca={"btl": "self"}, frameworks=["btl"]):
    pass
print("first use")
"""


def test_a_world_of_one_builds_the_data_path_at_first_use(pmca_env) -> None:
    child = run_python(_FIRST_USE_CHILD, timeout=120)
    assert child.returncode == 0, child.stderr
    assert "first use" in child.stdout


def test_asking_for_the_btl_modules_connects_them(pmca_env) -> None:
    world = GatheringWorld(1)
    with pmca.Session(mca={"btl": "self,tcp"}, frameworks=["btl"], world=world) as s:
        assert world.allgathers == 0
        assert s.components("btl") and world.allgathers == 0, "listing components connects"
        modules = s.modules("btl")
        assert world.allgathers == 1, "the modules were handed out before their modex"
        assert sorted(m.name for m in modules) == ["self", "tcp"]  # type: ignore[attr-defined]
        assert s.reach(0) == ["self"]
        s.modules("btl")
        assert world.allgathers == 1


def test_one_allgather_at_first_use_and_none_without_use(pmca_env) -> None:
    unused = GatheringWorld(1)
    with pmca.Session(mca={"btl": "self"}, frameworks=["btl"], world=unused):
        assert unused.allgathers == 0
    assert unused.allgathers == 0
    used = GatheringWorld(1)
    with pmca.Session(mca={"btl": "self"}, frameworks=["btl"], world=used) as s:
        assert s.world is used and used.allgathers == 0
        assert s.reach(0) == ["self"]
        _ = s.p2p
        assert s.reach(0) == ["self"]
        assert used.allgathers == 1


def test_a_world_of_several_ranks_still_exchanges_at_init(pmca_env) -> None:
    peer = _modex.pack({"self": b"self/1"}, pid=1, host="elsewhere/1")
    world = GatheringWorld(2, blobs=[_modex.pack({"self": b"self/1"}), peer])
    with pmca.Session(mca={"btl": "self"}, frameworks=["btl"], world=world) as s:
        assert world.allgathers == 1
        assert s.reach(0) == ["self"] and s.reach(1) == []
    assert world.allgathers == 1


def test_a_failure_at_first_use_names_what_failed_and_leaves_nothing(pmca_env) -> None:
    world = GatheringWorld(1, blobs=[b"not a modex at all"])
    message = "modex entry of rank 0: not a pmca modex"
    with pmca.Session(mca={"btl": "self,tcp"}, frameworks=["btl", "memory"], world=world) as s:
        with pytest.raises(ModexError, match=message):
            _ = s.p2p
        # every later use says the same; the rest of the session still works
        with pytest.raises(ModexError, match=message):
            s.reach(0)
        assert world.allgathers == 1
        assert {c.name for c in s.components("btl")} >= {"self"}
        assert s.components("memory")
    assert RUNTIME.sessions == 0 and not RUNTIME.frameworks
    assert not _data._tags_in_use
    # the same failure in a world of two ranks fails init with the same message
    peer = _modex.pack({}, pid=1, host="elsewhere/1")
    with pytest.raises(ModexError, match=message):
        pmca.Session(
            mca={"btl": "self"},
            frameworks=["btl"],
            world=GatheringWorld(2, blobs=[b"not a modex at all", peer]),
        ).init()
    assert RUNTIME.sessions == 0 and not RUNTIME.frameworks
    with pmca.Session(mca={"btl": "self"}, frameworks=["btl"]) as again:
        assert again.reach(0) == ["self"]


def test_unused_sessions_still_take_tags_in_creation_order(pmca_env) -> None:
    with (
        pmca.Session(mca={"btl": "self"}, frameworks=["btl"]) as first,
        pmca.Session(mca={"btl": "self"}, frameworks=["btl"]) as second,
    ):
        tags = (first._slot.tag, second._slot.tag)  # type: ignore[union-attr]
        assert tags[0] < tags[1] and set(tags) == _data._tags_in_use
        second.reach(0)  # built later, still the tag it took at init
        assert second._slot.tag == tags[1]  # type: ignore[union-attr]
    assert not _data._tags_in_use


def test_concurrent_first_uses_build_one_data_path(pmca_env) -> None:
    world = GatheringWorld(1)
    with pmca.Session(mca={"btl": "self"}, frameworks=["btl"], world=world) as s:
        start = threading.Barrier(4)
        seen: list[object] = []

        def use() -> None:
            start.wait()
            seen.append(s.p2p)

        threads = [threading.Thread(target=use) for _ in range(4)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(timeout=30)
        assert len(seen) == 4 and len({id(p) for p in seen}) == 1
        assert world.allgathers == 1


def test_after_finalize_the_unbuilt_data_path_is_not_built(pmca_env) -> None:
    world = GatheringWorld(1)
    s = pmca.Session(mca={"btl": "self"}, frameworks=["btl"], world=world).init()
    s.finalize()
    with pytest.raises(pmca.SessionError):
        _ = s.p2p
    with pytest.raises(pmca.SessionError):
        s.reach(0)
    assert world.allgathers == 0


_DSO_CHILD = """
import gc, os, sys, weakref
import pmca

from pmca.testing import mapped_files, open_sockets as sockets

def maps():
    return mapped_files("/pmca/btl/")

before = sockets()
for use in (False, True, False, True):
    with pmca.Session(mca={"btl": "self,sm,tcp"}, frameworks=["btl"]) as s:
        if use:
            assert s.reach(0) == ["self"]
        loaded = {
            name: weakref.ref(module)
            for name, module in sys.modules.items()
            if name.startswith(("pmca.btl.tcp", "pmca.btl.sm", "pmca.btl.self"))
        }
    left = [n for n in sys.modules if n.startswith(("pmca.btl.tcp", "pmca.btl.sm"))]
    assert not left, f"use={use}: modules left loaded: {left}"
    gc.collect()
    # Unloaded means gone: nothing process-wide (typing's caches, registries)
    # may keep an unloaded copy alive, or every dso cycle leaks one.
    alive = sorted(name for name, ref in loaded.items() if ref() is not None)
    assert not alive, f"use={use}: unloaded modules still alive: {alive}"
    assert not maps(), f"use={use}: native libraries still mapped: {maps()}"
    assert sockets() == before, f"use={use}: sockets left open: {sockets() - before}"
print("unloaded")
"""


def test_dso_unloads_every_btl_with_and_without_first_use(pmca_env) -> None:
    child = run_python(_DSO_CHILD, env={"PMCA_MCA_mca_base_component_dso": "all"}, timeout=120)
    assert child.returncode == 0, child.stderr
    assert "unloaded" in child.stdout
