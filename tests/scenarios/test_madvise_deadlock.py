"""Seed scenario 2: the madvise self-deadlock, reproduced by the old design, prevented by pmca's."""

from __future__ import annotations

import pytest

import pmca
from pmca.scenarios import madvise_deadlock
from pmca.scenarios._common import run_child

pytestmark = pytest.mark.usefixtures("native_backend")


def test_run_reproduces_then_prevents() -> None:
    reproduction, prevention = madvise_deadlock.run(timeout=10.0)
    assert (reproduction.outcome, prevention.outcome) == ("reproduced", "prevented"), (
        reproduction,
        prevention,
    )
    assert "self-deadlock" in reproduction.detail


def test_callback_inside_the_hook_hangs_where_the_lock_is_taken_again() -> None:
    child = run_child(madvise_deadlock.__name__, "_child", "callback-in-hook", hang_after=5.0)
    assert child.hung, child.describe_failure()
    assert child.payload is None
    # The watchdog's dump: the callback, called from madvise, inside the insert.
    innermost = [line for line in child.stderr.splitlines() if " in " in line][:4]
    assert [line.rsplit(" in ", 1)[1] for line in innermost] == [
        "on_release",
        "intercepted",
        "allocate",
        "insert",
    ]


def test_pmca_delivers_the_madvise_events_of_the_locked_path_later() -> None:
    child = run_child(madvise_deadlock.__name__, "_child", "pmca", hang_after=120.0)
    assert child.completed, child.describe_failure()
    payload = child.payload
    assert payload is not None
    assert payload["inserts"] == madvise_deadlock.INSERTS
    # The real madvise was hooked: the callback saw events for the spare pages...
    assert payload["madvise_events"] > 0
    assert payload["support"] & int(pmca.memory.FREE)
    # ...and only ever from the listener thread or a drain() on the main thread.
    assert set(payload["threads"]) <= {"pmca-release-listener", "MainThread"}


def test_quick_run_skips_only_the_reproduction() -> None:
    reproduction, prevention = madvise_deadlock.run(reproduce=False)
    assert reproduction.outcome == "skipped"
    assert prevention.outcome == "prevented"
