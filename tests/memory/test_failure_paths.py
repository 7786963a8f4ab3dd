"""Failure paths of the memory framework: nothing lost, nothing left open."""

from __future__ import annotations

import pytest

import pmca
import pmca.native as native
from pmca.memory._base import MemoryBase
from pmca.runtime import RUNTIME
from pmca.testing import run_python
from tests.memory.conftest import hooks_gone


def test_register_release_refuses_when_no_hook_goes_in(
    pmca_env: dict[str, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    def refuse(self: native.HookBackend, symbol: str) -> native.PatchSite:
        raise native.PatchRefused(symbol, 0, b"\xe9\x00\x00\x00\x00", "held by someone else")

    monkeypatch.setattr(native.HookBackend, "install", refuse)
    with pmca.Session(frameworks=["memory"]):
        with pytest.raises(
            pmca.memory.MemoryHooksUnavailable, match="could not be installed"
        ) as info:
            pmca.memory.register_release(lambda *event: None)
        assert "munmap" in str(info.value) and "held by someone else" in str(info.value)
        assert "memory=ucm" not in str(info.value)  # no UCX hooks here: no hint to use them
        assert pmca.memory.support_level() == pmca.memory.Support.NONE
    assert hooks_gone()


def test_a_base_failing_to_meet_its_peers_leaves_nothing_open(
    pmca_env: dict[str, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    def explode(self: MemoryBase, peer: object) -> None:
        raise RuntimeError("peer_opened failed")

    with pmca.Session(frameworks=["patcher"]):
        monkeypatch.setattr(MemoryBase, "peer_opened", explode)
        with pytest.raises(RuntimeError, match="peer_opened failed"):
            pmca.Session(frameworks=["memory"]).init()
        assert "memory" not in RUNTIME.frameworks
        assert RUNTIME.frameworks["patcher"].refcount == 1
    assert not RUNTIME.frameworks


def test_a_bad_base_parameter_leaves_no_parameters_behind(pmca_env: dict[str, str]) -> None:
    with pmca.Session(frameworks=[]) as keeper:
        with pytest.raises(pmca.ParamError, match="mpi_leave_pinned"):
            pmca.Session(mca={"mpi_leave_pinned": "sometimes"}, frameworks=["memory"]).init()
        assert "memory" not in RUNTIME.frameworks
        for name in ("memory", "memory_base_verbose"):
            with pytest.raises(pmca.ParamError):
                keeper.param(name)


def test_listener_works_with_descriptors_above_fd_setsize() -> None:
    """MPI ranks hold many descriptors; the listener waits on a futex, on no fd at all."""
    child = run_python(
        """
        import mmap, os, resource, threading, time
        soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
        resource.setrlimit(resource.RLIMIT_NOFILE, (max(soft, min(hard, 4096)), hard))
        spare = [os.open("/dev/null", os.O_RDONLY) for _ in range(1100)]
        import pmca
        with pmca.Session(frameworks=["memory"]):
            got = threading.Event()
            def on_release(address, length, kind, from_alloc):
                if kind == "munmap" and length == 1 << 20:
                    got.set()
            handle = pmca.memory.register_release(on_release)
            mmap.mmap(-1, 1 << 20).close()
            delivered = got.wait(30)  # the listener, not drain(), must deliver it
            handle.unregister()
        print("delivered", delivered, "listening-thread-alive", True)
        assert delivered
        """,
        timeout=120,
    )
    assert child.returncode == 0, child.stderr
    assert "delivered True" in child.stdout


_ODD_MEMORY = """
import pmca

class OddMemory(pmca.Component):
    framework = "memory"
    name = "odd"
    version = "1.0.0"
    api_version = "1.0.0"

    @pmca.hookimpl
    def query(self, ctx):
        return pmca.Query(priority=1000, module="not a module")
"""


def test_a_memory_component_returning_no_module_is_named(pmca_env, tmp_path) -> None:
    # Once "no memory component is selected (selection: '')", naming nothing.
    from pmca.testing._distributions import make_distribution

    site = tmp_path / "site"
    make_distribution(
        site,
        "pmca-odd-memory",
        entry_points={"pmca.memory": {"odd": "odd_memory:OddMemory"}},
        modules={"odd_memory": _ODD_MEMORY},
    )
    done = run_python(
        """
        import pmca
        with pmca.Session():
            try:
                pmca.memory.register_release(lambda *args: None)
            except pmca.memory.MemoryHooksUnavailable as exc:
                print(exc)
        """,
        env={"PYTHONPATH": str(site)},
    )
    assert done.returncode == 0, done.stderr
    message = done.stdout
    assert "memory component 'odd'" in message, message
    assert "distribution pmca-odd-memory 0.1.0" in message, message
    assert "returned 'not a module' (str)" in message, message
