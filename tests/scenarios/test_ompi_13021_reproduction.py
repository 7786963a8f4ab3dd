"""open-mpi/ompi#13021 reproduced: Open MPI 5.0.6's memory/patcher as a plugin.

Every run that can crash is a child process with a timeout.
"""

from __future__ import annotations

import json
import signal
import textwrap
from typing import Any

import pytest

import pmca
from pmca.memory import Support

from .conftest import RunVariant

CLAIMED = int(Support.FREE | Support.MUNMAP)


def rounds(records: list[dict[str, Any]]) -> dict[int, dict[str, Any]]:
    return {r["round"]: r for r in records if r["event"] == "round"}


def finalized(records: list[dict[str, Any]]) -> list[int]:
    return [r["round"] for r in records if r["event"] == "finalized"]


CLOSE_CHAIN = [
    "in opal_patcher_base_restore_all",
    "in opal_patcher_base_close",
    "in patcher_close",
    "in finalize",
]


def _faulting_thread(stderr: str) -> str:
    assert "Fatal Python error: Segmentation fault" in stderr, stderr
    return stderr.partition("Current thread")[2]


def sessions_init_twice(btl: str) -> str:
    return f"from pmca.scenarios._13021_child import main\nmain(2, {btl!r})\n"


def needs_ofi(btl: str) -> None:
    from pmca.scenarios.ompi_13021 import ofi_unavailable

    missing = ofi_unavailable() if btl == "ofi" else None
    if missing is not None:
        pytest.skip(missing)


TRIGGERS = ["", "ofi", "tcp"]


@pytest.mark.parametrize("btl", TRIGGERS, ids=["release", "btl=ofi", "btl=tcp"])
@pytest.mark.parametrize("quarantine", [True, False], ids=["quarantine", "no-quarantine"])
def test_dso_second_finalize_dies_in_restore_all(
    reproduction_plugin: str, run_variant_child: RunVariant, quarantine: bool, btl: str
) -> None:
    """With or without pmca's quarantine: the raw opal_patcher pointer into the
    unloaded overwrite library faults in restore-all, as 5.0.6 did; with the
    seed's own trigger (btl=ofi, whose registration needs installed the hooks
    at session init) as with btl=tcp."""
    needs_ofi(btl)
    env = {"PMCA_MCA_mca_base_component_quarantine": str(quarantine).lower()}
    child, records = run_variant_child(
        reproduction_plugin, "dso", sessions_init_twice(btl), env=env
    )

    assert child.returncode == -signal.SIGSEGV, child.stderr
    # faulthandler's trace of the faulting thread, innermost first: the
    # fault is in restore-all itself, reached through Open MPI's close chain.
    trace = _faulting_thread(child.stderr)
    first = next(line for line in trace.splitlines() if line.strip().startswith("File"))
    assert first.endswith("in opal_patcher_base_restore_all"), trace
    assert "pmca_ompi_13021/patcher_base.py" in first
    positions = [trace.find(frame) for frame in CLOSE_CHAIN]
    assert -1 not in positions, trace
    assert positions == sorted(positions), trace
    # Session 1 worked; session 2 ran (without hooks) and its finalize crashed.
    by_round = rounds(records)
    assert by_round[1]["delivered"] and by_round[1]["patcher"] == [["overwrite", "dso"]]
    assert not by_round[2]["delivered"]
    assert by_round[2]["support"] == CLAIMED
    assert finalized(records) == [1]
    assert by_round[1]["moved"] and by_round[2]["moved"]
    if btl == "ofi":
        assert by_round[1]["btl"] == ["self", "ofi"]
        assert by_round[1]["hooked_at_selection"]  # ofi's registration needs, not a callback
        assert not by_round[2]["hooked_at_selection"]  # the guard: no select, no patches
    # The stale-reference check saw the Python half of the pointer (warn mode).
    assert "pmca_ompi_13021.patcher_base.opal_patcher still refers to" in child.stderr


@pytest.mark.parametrize("mode", ["static", "dso"])
def test_stale_check_names_the_global_at_the_first_finalize(
    reproduction_plugin: str, run_variant_child: RunVariant, mode: str
) -> None:
    """At its default (error), the check stops the run before session 2."""
    env = {"PMCA_MCA_mca_base_component_stale_check": "error"}
    code = "import sys\nfrom pmca.scenarios._13021_child import main\nsys.exit(main())\n"
    child, records = run_variant_child(reproduction_plugin, mode, code, env=env)

    assert child.returncode == 1, child.stderr
    stale = [r for r in records if r["event"] == "stale"]
    assert len(stale) == 1 and stale[0]["round"] == 1
    message = stale[0]["message"]
    assert "pmca_ompi_13021.patcher_base.opal_patcher still refers to component " in message
    assert "patcher/overwrite after it was closed" in message
    assert sorted(rounds(records)) == [1]


@pytest.mark.parametrize("btl", TRIGGERS, ids=["release", "btl=ofi", "btl=tcp"])
def test_static_second_session_silently_runs_without_hooks(
    reproduction_plugin: str, run_variant_child: RunVariant, btl: str
) -> None:
    needs_ofi(btl)
    child, records = run_variant_child(reproduction_plugin, "static", sessions_init_twice(btl))

    assert child.returncode == 0, child.stderr
    by_round = rounds(records)
    assert by_round[1]["memory"] == [[reproduction_plugin, "static"]]
    assert by_round[1]["patcher"] == [["overwrite", "static"]]
    assert by_round[1]["delivered"] and by_round[1]["munmap_hooked"]
    # The silent bug: nothing hooked, no event, yet FREE|MUNMAP is claimed.
    assert not by_round[2]["munmap_hooked"]
    assert not by_round[2]["delivered"]
    assert by_round[2]["support"] == CLAIMED
    assert finalized(records) == [1, 2]
    end = records[-1]
    assert end["event"] == "end" and end["prologues_restored"], end


def test_losing_selection_leaves_no_trace(
    reproduction_plugin: str, run_variant_child: RunVariant, pmca_load_mode: str
) -> None:
    """Queried and beaten by pmca's patcher: no patch, no guard, no global; a later
    session that asks for the reproduction gets a first-time run."""
    code = textwrap.dedent(
        """
        import json, mmap, sys
        import pmca
        from pmca.memory import Support

        def delivered_and_owners(session):
            seen = []
            handle = pmca.memory.register_release(lambda a, n, k, f: seen.append((n, k)))
            owners = sorted({p.owner for p in session.module("patcher").patches()})
            region = mmap.mmap(-1, 5 * mmap.PAGESIZE)
            region.close()
            pmca.memory.drain()
            handle.unregister()
            return (5 * mmap.PAGESIZE, "munmap") in seen, owners

        with pmca.Session(mca={"memory": "patcher,ompi13021"}) as s:
            selected = [c.name for c in s.components("memory")]
            first = delivered_and_owners(s)
        plugin = sys.modules["pmca_ompi_13021.memory_patcher"]
        base = sys.modules["pmca_ompi_13021.patcher_base"]
        hooks = sys.modules["pmca_ompi_13021.memoryhooks"]
        trace = {
            "guard": plugin.was_executed_already,
            "global_empty": base.opal_patcher is pmca.patcher.EMPTY_PATCHER,
            "support": int(hooks.hooks_support),
        }
        with pmca.Session(mca={"memory": "ompi13021"}) as s:
            again = [c.name for c in s.components("memory")]
            second = delivered_and_owners(s)
        print(json.dumps([selected, first, trace, again, second]))
        """
    )
    # The reproduction's second session leaves its stale global, as always.
    env = {"PMCA_MCA_mca_base_component_stale_check": "warn"}
    child, _ = run_variant_child("patcher", pmca_load_mode, code, timeout=60, env=env)

    assert child.returncode == 0, child.stderr
    selected, first, trace, again, second = json.loads(child.stdout)
    assert selected == ["patcher"]
    assert first == [True, ["memory/patcher"]]
    assert trace == {"guard": False, "global_empty": True, "support": 0}
    assert again == [reproduction_plugin]
    assert second == [True, ["memory/ompi13021"]]


def test_never_selected_unless_named(reproduction_plugin: str, pmca_env: dict[str, str]) -> None:
    """Not by default, not by an exclusion list: only ``memory=ompi13021`` picks it."""
    for selection, expected in (("", "patcher"), ("^patcher", "none"), ("^none", "patcher")):
        with pmca.Session(mca={"memory": selection}, frameworks=["memory"]) as session:
            assert [c.name for c in session.components("memory")] == [expected], selection


@pytest.mark.parametrize(
    ("leave_pinned", "pipeline", "seed", "ompi5"),
    [
        (None, "false", "no", "runtime"),  # (not set, no)
        ("auto", "false", "no", "runtime"),  # (runtime, no)
        ("false", "false", "no", "no"),
        (None, None, "runtime", "runtime"),
    ],
)
def test_activation_cells_follow_5x_for_the_plugin_only(
    reproduction_plugin: str,
    pmca_env: dict[str, str],
    leave_pinned: str | None,
    pipeline: str | None,
    seed: str,
    ompi5: str,
) -> None:
    """rcache_base_create.c:60 opens the memory framework whenever leave_pinned != 0.

    In-process: no cell here installs hooks at open, so the plugin's one-shot
    guard stays untouched for the other tests.
    """
    from pmca.runtime import RUNTIME

    mca = {"mpi_leave_pinned": leave_pinned, "mpi_leave_pinned_pipeline": pipeline}
    mca = {name: value for name, value in mca.items() if value is not None}
    decisions = {}
    for component in ("patcher", reproduction_plugin):
        with pmca.Session(mca={**mca, "memory": component}, frameworks=["memory"]):
            decisions[component] = RUNTIME.frameworks["memory"].base.decision  # type: ignore[union-attr]
    assert decisions == {"patcher": seed, reproduction_plugin: ompi5}
