"""open-mpi/ompi#13021 reproduced: Open MPI 5.0.6's memory/patcher as a plugin.

Every run that can crash is a child process with a timeout.
"""

from __future__ import annotations

import json
import signal
import textwrap
from typing import Any

import pmca
from pmca.memory import Support

from .conftest import RunVariant

CLAIMED = int(Support.FREE | Support.MUNMAP)


def rounds(records: list[dict[str, Any]]) -> dict[int, dict[str, Any]]:
    return {r["round"]: r for r in records if r["event"] == "round"}


def finalized(records: list[dict[str, Any]]) -> list[int]:
    return [r["round"] for r in records if r["event"] == "finalized"]


def test_dso_second_finalize_dies_in_restore_all(
    reproduction_plugin: str, run_variant_child: RunVariant
) -> None:
    child, records = run_variant_child(reproduction_plugin, "dso")

    assert child.returncode == -signal.SIGSEGV, child.stderr
    # faulthandler's trace, innermost first: the stale module's native call,
    # reached through Open MPI's close chain and its global.
    trace = child.stderr
    assert "Fatal Python error: Segmentation fault" in trace
    frames = [
        "in pop",
        "in restore_all",
        "in opal_patcher_base_restore_all",
        "in opal_patcher_base_close",
        "in patcher_close",
        "in finalize",
    ]
    positions = [trace.find(frame) for frame in frames]
    assert -1 not in positions, trace
    assert positions == sorted(positions), trace
    assert "overwrite/_table.py" in trace
    # Session 1 worked; session 2 ran (without hooks) and its finalize crashed.
    by_round = rounds(records)
    assert by_round[1]["delivered"] and by_round[1]["patcher"] == [["overwrite", "dso"]]
    assert not by_round[2]["delivered"]
    assert by_round[2]["support"] == CLAIMED
    assert finalized(records) == [1]


def test_static_second_session_silently_runs_without_hooks(
    reproduction_plugin: str, run_variant_child: RunVariant
) -> None:
    child, records = run_variant_child(reproduction_plugin, "static")

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
    child, _ = run_variant_child("patcher", pmca_load_mode, code, timeout=60)

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
