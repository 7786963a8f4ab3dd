"""Events of each type reach the callbacks registered for them, with their fields."""

from __future__ import annotations

import mmap
import os
import socket
import subprocess
import sys
import textwrap
import threading
from typing import Any

import pytest

import pmca
import pmca.native as native
from pmca.mca import PVarError, Safety
from pmca.mca._events import Events
from pmca.world import PairWorld
from tests.conftest import component_source


def _collect(into: list[tuple[str, dict[str, Any]]]) -> Any:
    def callback(name: str, fields: Any) -> None:
        into.append((name, dict(fields)))

    return callback


def test_types_are_declared_with_fields(pmca_env) -> None:
    with pmca.Session(frameworks=["memory"]) as s:
        types = {t.name: t for t in s.event_types()}
    assert types["memory_patcher_release"].fields == ("addresses", "lengths", "kinds", "overflow")
    assert types["mca_base_component_failed"].fields == ("framework", "component", "hook", "error")
    assert types["mca_base_component_selected"].level == 3


def test_safety_decides_where_a_callback_runs() -> None:
    events = Events()
    events.declare("demo", "x", "tick", ("n",), description="a tick")
    calls: list[tuple[str, dict[str, Any]]] = []
    strict = events.register("demo_x_tick", _collect(calls), Safety.NONE)
    lenient = events.register("demo_x_tick", _collect(calls), Safety.THREAD_SAFE)
    events.emit("demo_x_tick", Safety.THREAD_SAFE, {"n": 1})  # from pmca's own thread
    events.emit("demo_x_tick", Safety.NONE, {"n": 2})
    assert calls == [
        ("demo_x_tick", {"n": 1}),
        ("demo_x_tick", {"n": 2}),
        ("demo_x_tick", {"n": 2}),
    ]
    assert (strict.dropped, strict.delivered, lenient.delivered) == (1, 1, 2)
    lenient.unregister()
    events.emit("demo_x_tick", Safety.NONE, {"n": 3})
    assert len(calls) == 4
    with pytest.raises(PVarError, match="no event type named 'demo_x_tock'"):
        events.register("demo_x_tock", _collect(calls))
    with pytest.warns(RuntimeWarning, match="raised ZeroDivisionError"):
        events.register("demo_x_tick", lambda *_: 1 / 0)
        events.emit("demo_x_tick", Safety.NONE, {"n": 4})


@pytest.mark.skipif(not native.available(), reason="native hook backend unavailable")
def test_memory_release_batches_come_from_the_drain_not_a_hook(pmca_env) -> None:
    seen: list[tuple[list[int], list[int], str]] = []

    def on_release(name: str, fields: Any) -> None:
        seen.append(
            (list(fields["addresses"]), list(fields["lengths"]), threading.current_thread().name)
        )

    with pmca.Session(frameworks=["memory"]) as s:
        s.register_event("memory_patcher_release", on_release, Safety.THREAD_SAFE)
        mmap.mmap(-1, 1 << 20).close()
        pmca.memory.drain()
    lengths = [length for _, ls, _ in seen for length in ls]
    assert any(length >= 1 << 20 for length in lengths), lengths[:10]


def test_component_selected_and_failed(install_framework, unique) -> None:
    fw = unique("evfw")
    install_framework(
        fw,
        {
            "good": component_source(fw, "good", priority=20),
            "bad": component_source(fw, "bad", fail_in="query"),
        },
        policy="multi",
    )
    calls: list[tuple[str, dict[str, Any]]] = []
    with pmca.Session(frameworks=["memory"]) as s:
        s.register_event("mca_base_component_selected", _collect(calls))
        s.register_event("mca_base_component_failed", _collect(calls))
        with pmca.Session(frameworks=[fw]) as inner:
            inner.modules(fw)
    mine = [(n, f) for n, f in calls if f["framework"] == fw]
    assert (
        "mca_base_component_selected",
        {"framework": fw, "component": "good", "priority": 20},
    ) in mine
    failed = [f for n, f in mine if n == "mca_base_component_failed"]
    assert failed == [
        {
            "framework": fw,
            "component": "bad",
            "hook": "query",
            "error": "RuntimeError: boom in query",
        }
    ]


_PEER = textwrap.dedent(
    """
    import socket, sys
    import pmca
    from pmca.world import PairWorld
    world = PairWorld(socket.socket(fileno=int(sys.argv[1])), 1)
    s = pmca.Session(mca={"btl": "self,tcp"}, frameworks=["btl"], world=world).init()
    s.p2p.send(0, 1, b"hello")
    import os
    os._exit(0)  # vanish without finalizing
    """
)


def test_peer_failure_names_the_rank(pmca_env, tmp_path) -> None:
    script = tmp_path / "peer.py"
    script.write_text(_PEER)
    parent, child_end = socket.socketpair()
    child = subprocess.Popen(
        [sys.executable, str(script), str(child_end.fileno())], pass_fds=[child_end.fileno()]
    )
    child_end.close()
    calls: list[tuple[str, dict[str, Any]]] = []
    world = PairWorld(parent, 0)
    with pmca.Session(mca={"btl": "self,tcp"}, frameworks=["btl"], world=world) as s:
        s.register_event("btl_base_peer_failed", _collect(calls))
        s.p2p.recv(1, 1, bytearray(5))
        child.wait(timeout=60)
        with pytest.raises(pmca.btl.PeerFailed):
            s.p2p.recv(1, 2, bytearray(1), timeout=60)
    assert calls and calls[0][1]["rank"] == 1, calls
    assert os.path.exists(script)
