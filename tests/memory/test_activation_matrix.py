"""When the hooks go in: every cell of Open MPI's leave_pinned x leave_pinned_pipeline matrix.

"Installed" is read from libc's bytes (the prologue jumps to pmca), and the
memory module's own claim must agree.  The expected table is Open MPI's,
transcribed in :mod:`pmca.scenarios.activation` independently of
:mod:`pmca.memory._activation`.
"""

from __future__ import annotations

import mmap

import pytest

import pmca
from pmca.scenarios.activation import CELLS, EXPECTED, SelfTest, Setting, cell_mca
from tests.memory.conftest import hooks_gone, hooks_live

IDS = [f"lp={lp}-lpp={lpp}".replace(" ", "_") for lp, lpp in CELLS]


def installed(session: pmca.Session) -> bool:
    live = hooks_live()
    module = session.module("memory")
    assert isinstance(module, pmca.memory.MemoryModule)
    assert module.installed() == live, "the memory module's claim disagrees with libc's bytes"
    return live


def ignore(address: int, length: int, kind: str, from_alloc: bool) -> None:
    pass


@pytest.mark.parametrize(("leave_pinned", "pipeline"), CELLS, ids=IDS)
def test_component_needing_registration(
    leave_pinned: Setting, pipeline: Setting, registering_framework: str, pmca_load_mode: str
) -> None:
    expected = EXPECTED[(leave_pinned, pipeline)]
    with pmca.Session(mca=cell_mca(leave_pinned, pipeline), frameworks=["memory"]) as session:
        assert installed(session) is (expected == "yes")
        with pmca.Session(frameworks=[registering_framework]) as inner:
            assert inner.components(registering_framework)[0].load_mode == pmca_load_mode
            assert installed(session) is (expected != "no")
        # The hooks belong to the memory framework's open, not to the component's.
        assert installed(session) is (expected != "no")
        if expected != "no":
            assert session.components("patcher")[0].load_mode == pmca_load_mode
    assert hooks_gone()


@pytest.mark.parametrize(("leave_pinned", "pipeline"), CELLS, ids=IDS)
def test_first_register_release(leave_pinned: Setting, pipeline: Setting) -> None:
    expected = EXPECTED[(leave_pinned, pipeline)]
    with pmca.Session(mca=cell_mca(leave_pinned, pipeline), frameworks=["memory"]) as session:
        assert installed(session) is (expected == "yes")
        if expected == "no":
            with pytest.raises(pmca.memory.MemoryHooksUnavailable) as refused:
                pmca.memory.register_release(ignore)
            assert "mpi_leave_pinned " in str(refused.value) or "mpi_leave_pinned=" in str(
                refused.value
            )
            assert "mpi_leave_pinned_pipeline" in str(refused.value)
            assert not installed(session)
            assert pmca.memory.support_level() == pmca.memory.Support.NONE
            return
        handle = pmca.memory.register_release(ignore)
        assert installed(session)
        assert pmca.memory.support_level() & pmca.memory.MUNMAP
        handle.unregister()
        assert installed(session), "hooks stay until the memory framework closes"


def test_environment_counts_as_set(pmca_env: dict[str, str]) -> None:
    # Not set on the command line/API, but set in the environment: the
    # pipeline's "yes" column installs at open.
    pmca_env["PMCA_MCA_mpi_leave_pinned_pipeline"] = "1"
    with pmca.Session(frameworks=["memory"]) as session:
        assert session.param("mpi_leave_pinned_pipeline").value == 1
        assert installed(session)


def test_default_auto_value_is_not_a_setting() -> None:
    # Both default to auto (-1): "not set" x "not set" is "runtime", not "yes".
    with pmca.Session(frameworks=["memory"]) as session:
        assert session.param("mpi_leave_pinned").value == -1
        assert not installed(session)


def test_selected_component_without_needs_registration_installs_nothing(
    plain_framework: str,
) -> None:
    with (
        pmca.Session(frameworks=["memory"]) as session,
        pmca.Session(frameworks=[plain_framework]),
    ):
        assert not installed(session)


def test_unselected_component_needing_registration_installs_nothing(
    registering_framework: str,
) -> None:
    # Excluded by the selection parameter: it is never even imported.
    with pmca.Session(mca={registering_framework: "^pinned"}, frameworks=["memory"]) as session:
        with pmca.Session(frameworks=[registering_framework]) as inner:
            assert inner.components(registering_framework) == []
        assert not installed(session)


def test_registration_framework_opened_before_memory(registering_framework: str) -> None:
    # The other order: the component is already selected when memory opens.
    with pmca.Session(frameworks=[registering_framework]):
        with pmca.Session(frameworks=["memory"]) as session:
            assert installed(session)
        assert hooks_gone()


def test_runtime_install_catches_real_releases() -> None:
    released: list[tuple[int, int, str, bool]] = []

    def record(address: int, length: int, kind: str, from_alloc: bool) -> None:
        released.append((address, length, kind, from_alloc))

    with pmca.Session(frameworks=["memory"]):
        handle = pmca.memory.register_release(record)
        region = mmap.mmap(-1, 1 << 20)
        region.close()
        pmca.memory.drain()
        handle.unregister()
    assert any(kind == "munmap" and length >= 1 << 20 for _, length, kind, _ in released)


def test_support_level_comes_from_the_self_test() -> None:
    with pmca.Session(frameworks=["memory"]) as session:
        assert pmca.memory.support_level() == pmca.memory.Support.NONE  # nothing installed yet
        handle = pmca.memory.register_release(ignore)
        module = session.module("memory")
        # Not isinstance(PatcherMemory): in dso runs the first load re-imports
        # pmca.memory.patcher before it learns the component is forced static.
        assert type(module).__name__ == "PatcherMemory"
        probes: dict[str, bool] = dict(vars(module)["self_test"])
        # Re-run the self-test independently while the hooks are live.
        assert pmca.native.self_test(list(probes)) == probes
        support = pmca.memory.support_level()
        expected = SelfTest(probes, int(support), "").expected_support()
        assert support == expected
        # On Linux/glibc with the backend available, every release path works.
        assert expected == pmca.memory.FREE | pmca.memory.MUNMAP
        handle.unregister()


def test_forced_dso_installs_and_restores_twice(registering_framework: str) -> None:
    mca = {"mca_base_component_dso": "all"}
    for _ in range(2):
        with pmca.Session(mca=mca, frameworks=["memory", registering_framework]) as session:
            assert session.components("patcher")[0].load_mode == "dso"
            assert session.components("memory")[0].load_mode == "static"  # forced static
            assert installed(session)
        assert hooks_gone()


def _plugin(framework: str, name: str, *, priority: int, needs_registration: bool) -> str:
    """The source of a ``framework`` component whose query returns a plain object."""
    return f"""
import pmca


class Module:
    name = {name!r}


class Plugin(pmca.Component):
    framework = {framework!r}
    name = {name!r}
    needs_registration = {needs_registration}

    @pmca.hookimpl
    def query(self, ctx):
        return pmca.Query(priority={priority}, module=Module())
"""


def test_a_btl_needing_registration_installs_when_first_used(install_plugin) -> None:
    # A world of one rank selects its btl components at first use: the hooks
    # go in then, because only then is a component needing registration selected.
    install_plugin(
        "pmca-pinning-btl",
        entry_points={"pmca.btl": {"pinning": "pmca_pinning_btl:Plugin"}},
        modules={
            "pmca_pinning_btl": _plugin("btl", "pinning", priority=1, needs_registration=True)
        },
    )
    with pmca.Session(mca={"btl": "self,pinning"}, frameworks=["memory", "btl"]) as session:
        assert not installed(session), "installed before any btl was selected"
        assert [c.name for c in session.components("btl")] == ["self", "pinning"]
        assert installed(session)
    assert hooks_gone()


def test_a_selected_memory_component_without_a_memory_module_is_named(install_plugin) -> None:
    install_plugin(
        "pmca-odd-memory",
        entry_points={"pmca.memory": {"odd": "pmca_odd_memory:Plugin"}},
        modules={
            "pmca_odd_memory": _plugin("memory", "odd", priority=100, needs_registration=False)
        },
    )
    with pmca.Session(mca={"memory": "odd"}, frameworks=["memory"]):
        assert pmca.memory.support_level() == pmca.memory.Support.NONE
        with pytest.raises(
            pmca.memory.MemoryHooksUnavailable,
            match=r"memory component 'odd' from .*\(Module\) from its query, not a memory module",
        ):
            pmca.memory.register_release(lambda *event: None)
    assert hooks_gone()


def test_no_memory_component_selected_is_said_at_the_first_release_callback() -> None:
    nothing = pmca.Session(mca={"memory": "^patcher,ucm,none"}, frameworks=["memory"])
    unavailable = pytest.raises(
        pmca.memory.MemoryHooksUnavailable, match="no memory component is selected"
    )
    with nothing, unavailable:
        pmca.memory.register_release(lambda *event: None)
    assert hooks_gone()
