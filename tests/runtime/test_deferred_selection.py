"""A world of one rank registers its btl components at init and opens them at first use."""

from __future__ import annotations

import pytest

import pmca
from pmca.btl.base import _modex
from pmca.runtime import RUNTIME
from pmca.testing import run_python

from .test_data_path import GatheringWorld

_RECORDING_BTL = """
import pmca
from pmca_recording_events import EVENTS


class Module:
    name = "recording"
    exclusivity = 1
    latency = 1
    bandwidth = 1


class Recording(pmca.Component):
    framework = "btl"
    name = "recording"

    @pmca.hookimpl
    def register(self, params):
        EVENTS.append("register")
        params.register("mood", type=str, default="calm", help="what query does")

    @pmca.hookimpl
    def open(self, ctx):
        EVENTS.append("open")

    @pmca.hookimpl
    def query(self, ctx):
        EVENTS.append("query")
        if ctx.params["mood"] == "broken":
            raise RuntimeError("btl_recording_mood says broken")
        return None

    @pmca.hookimpl
    def close(self, ctx):
        EVENTS.append("close")
"""


@pytest.fixture
def recording(install_plugin) -> list[str]:
    """A third-party btl component that records which of its hooks ran.

    The record lives in a module of its own: in dso mode every load of the
    component imports its module afresh.
    """
    install_plugin(
        "pmca-recording-btl",
        entry_points={"pmca.btl": {"recording": "pmca_recording_btl:Recording"}},
        modules={"pmca_recording_btl": _RECORDING_BTL, "pmca_recording_events": "EVENTS = []"},
    )
    import pmca_recording_events  # type: ignore[import-not-found]

    events: list[str] = pmca_recording_events.EVENTS
    events.clear()
    return events


def test_a_session_that_never_uses_btl_never_opens_its_components(recording) -> None:
    with pmca.Session(mca={"btl": "self,recording"}, frameworks=["btl"]) as s:
        assert recording == ["register"]
        # Its parameters are registered and settable from init on.
        assert s.param("btl_recording_mood").value == "calm"
    assert recording == ["register"], "a component never opened is never closed either"
    assert RUNTIME.sessions == 0 and not RUNTIME.frameworks


@pytest.mark.parametrize(
    "first_use",
    [
        lambda s: s.components("btl"),
        lambda s: s.failures("btl"),
        lambda s: s.framework("btl").modules(),
        lambda s: s.modules("btl"),
        lambda s: s.reach(0),
    ],
    ids=["components", "failures", "framework", "modules", "reach"],
)
def test_first_use_opens_and_queries_once(recording, first_use) -> None:
    with pmca.Session(mca={"btl": "self,recording"}, frameworks=["btl"]) as s:
        first_use(s)
        assert recording == ["register", "open", "query", "close"], "declined: closed at once"
        assert [c.name for c in s.components("btl")] == ["self"]
        assert s.reach(0) == ["self"]
    assert recording == ["register", "open", "query", "close"]


def test_a_failing_query_is_reported_at_first_use_as_at_init(recording) -> None:
    mca = {"btl": "self,recording", "btl_recording_mood": "broken"}
    with pmca.Session(mca=mca, frameworks=["btl"]) as s:
        assert recording == ["register"], "init met nothing to fail on"
        (failure,) = s.failures("btl")
        assert s.reach(0) == ["self"], "the others still work"
    recording.clear()
    peer = _modex.pack({"self": b"self/1"}, pid=1, host="elsewhere/1")
    world = GatheringWorld(2, blobs=[_modex.pack({"self": b"self/1"}), peer])
    with pmca.Session(mca=mca, frameworks=["btl"], world=world) as several:
        assert recording == ["register", "open", "query", "close"], "several ranks: at init"
        (at_init,) = several.failures("btl")
    assert (failure.component, failure.hook) == ("recording", "query")
    assert (at_init.component, at_init.hook) == ("recording", "query")
    assert failure.message == at_init.message
    assert "btl_recording_mood says broken" in failure.message


def test_a_session_with_several_ranks_settles_a_deferred_btl(recording) -> None:
    peer = _modex.pack({"self": b"self/1"}, pid=1, host="elsewhere/1")
    world = GatheringWorld(2, blobs=[_modex.pack({"self": b"self/1"}), peer])
    with pmca.Session(mca={"btl": "self,recording"}, frameworks=["btl"]) as alone:
        assert recording == ["register"]
        with pmca.Session(frameworks=["btl"], world=world) as several:
            assert recording == ["register", "open", "query", "close"]
            assert several.reach(0) == ["self"]
        assert [m.name for m in alone.modules("btl")] == ["self"]  # type: ignore[attr-defined]
    assert recording.count("open") == 1


_RESOURCES_CHILD = """
import sys
import pmca
from pmca.testing import mapped_files, open_sockets

def imported():
    return sorted(n for n in sys.modules if n.startswith(("pmca.btl.tcp.", "pmca.btl.sm.")))

before = open_sockets()
with pmca.Session() as s:
    assert open_sockets() == before, "init listened on a socket"
    assert not mapped_files("memfd:pmca-btl-sm"), "init created an sm segment"
    assert imported() == ["pmca.btl.sm._defaults"], imported()
    assert s.param("btl_tcp_if_include").value == ""
    names = [m.name for m in s.modules("btl")]
    assert names[:3] == ["self", "sm", "tcp"], names
    assert len(open_sockets()) > len(before), "tcp listens once used"
    assert mapped_files("memfd:pmca-btl-sm"), "sm maps its segment once used"
assert open_sockets() == before
print("deferred")
"""


def test_init_of_a_world_of_one_makes_no_socket_and_no_segment(pmca_env) -> None:
    child = run_python(_RESOURCES_CHILD, timeout=120)
    assert child.returncode == 0, child.stderr
    assert "deferred" in child.stdout
