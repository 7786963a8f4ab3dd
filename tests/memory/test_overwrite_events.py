"""Each kind of overwrite raises ``memory_patcher_overwrite`` with its fields; foreign ones count.

Every scenario runs in a fresh (multi-threaded) process without UCX. The
overwrites land on ``shmdt``, which nothing in these processes calls, so
writing over its entry while the listener thread runs is safe.
"""

from __future__ import annotations

import pytest

from ..native.test_processes import COMMON, FOREIGN
from .test_overwrite import OVERWRITE

pytestmark = pytest.mark.native

SESSION = """
from pmca import memory
from pmca.mca import Safety
from pmca.session import Session

def write_unused(address, data):
    # shmdt only: nothing calls it while its entry is half written.
    page = address & ~(PAGE - 1)
    assert libc_raw.mprotect(page, 2 * PAGE, 7) == 0
    ctypes.memmove(address, data, len(data))
    assert libc_raw.mprotect(page, 2 * PAGE, 5) == 0

events = []
session = Session(frameworks=["memory"])
session.__enter__()
listening = session.register_event(
    "memory_patcher_overwrite", lambda name, fields: events.append(dict(fields)), Safety.THREAD_SAFE
)
detected = session.pvar_session().handle("memory_patcher_overwrites_detected")
handle = memory.register_release(lambda *e: None)
assert hooks.is_installed("shmdt")
"""

END = """
listening.unregister()
handle.unregister()
session.__exit__(None, None, None)
print("event ok")
"""


def test_original_bytes_written_back_raise_the_event_without_an_owner(run_python) -> None:
    result = run_python(
        COMMON
        + FOREIGN
        + OVERWRITE
        + SESSION
        + """
overwrite_with_original("shmdt")
memory.support_level()          # notices the overwrite (as the next drain would)
assert events == [{"symbols": ("shmdt",), "foreign": {}}], events
assert detected.read() == 1
memory.drain()
assert len(events) == 1         # reported once
"""
        + END,
        timeout=60,
    )
    assert "event ok" in result.stdout


@pytest.mark.parametrize("style", ["ompi", "ucx"])
def test_a_foreign_jump_over_ours_raises_the_event_naming_it(run_python, style) -> None:
    result = run_python(
        COMMON
        + FOREIGN
        + SESSION
        + f"""
site = hooks.site("shmdt")
write_unused(site.patch_address, JUMPS["{style}"])
memory.support_level()
assert len(events) == 1, events
(event,) = events
assert event["symbols"] == ("shmdt",), event
assert list(event["foreign"]) == ["shmdt"], event
patch = event["foreign"]["shmdt"]
assert patch.symbol == "shmdt" and patch.target == code, patch
assert patch.found.startswith(JUMPS["{style}"]), patch
assert patch.owner.startswith("an unknown patcher"), patch.owner   # a page of no library
assert detected.read() == 1
"""
        + END,
        timeout=60,
    )
    assert "event ok" in result.stdout


@pytest.mark.parametrize("style", ["ompi", "ucx"])
def test_a_foreign_patch_found_before_ours_is_counted(run_python, style) -> None:
    result = run_python(
        COMMON
        + FOREIGN
        + f"""
from pmca import memory
from pmca.memory.patcher._module import SYMBOLS
from pmca.session import Session

write_code(hooks.address("shmdt"), JUMPS["{style}"])   # still one thread
with Session(frameworks=["memory"]) as s:
    seen = s.pvar_session().handle("patcher_overwrite_foreign_patches_seen")
    installed = s.pvar_session().handle("patcher_overwrite_patches_installed")
    handle = memory.register_release(lambda *e: None)
    refused = s.module("memory").refused
    assert "shmdt" in refused, refused
    assert seen.read() == 1, seen.read()
    assert installed.read() == len(SYMBOLS) - len(refused)   # the others went in
    handle.unregister()
print("seen ok")
""",
        timeout=60,
    )
    assert "seen ok" in result.stdout


def test_a_patch_refused_for_an_unknown_prologue_is_not_counted_foreign(run_python) -> None:
    # Bytes no patcher writes (int3s) make the patch refused, but they are no
    # other library's jump: foreign_patches_seen stays 0.
    result = run_python(
        COMMON
        + FOREIGN
        + """
from pmca import memory
from pmca.session import Session

entry = hooks.address("shmdt")
original = hooks.prologue("shmdt", 8)
write_code(entry, b"\\xcc" * 8)   # still one thread; nothing calls shmdt
with Session(frameworks=["memory"]) as s:
    seen = s.pvar_session().handle("patcher_overwrite_foreign_patches_seen")
    handle = memory.register_release(lambda *e: None)
    assert "shmdt" in s.module("memory").refused, s.module("memory").refused
    assert seen.read() == 0, seen.read()
    handle.unregister()
write_code(entry, original)
print("unknown ok")
""",
        timeout=60,
    )
    assert "unknown ok" in result.stdout


#: The patcher's restore counters, for programs that start with SESSION.
RESTORE = """
from pmca import patcher

pvars = session.pvar_session()
not_ours = pvars.handle("patcher_overwrite_patches_not_ours")
restored = pvars.handle("patcher_overwrite_patches_restored")
"""


def _restore_program(run_python, program: str) -> str:
    """Run ``program`` after SESSION and RESTORE, with the patcher's warnings shown;
    its standard error."""
    result = run_python(
        COMMON + FOREIGN + OVERWRITE + SESSION + RESTORE + program + END,
        timeout=60,
        env={"PMCA_MCA_patcher_base_verbose": "warn"},
    )
    assert "event ok" in result.stdout
    return result.stderr


@pytest.mark.parametrize("noticed", [False, True])
@pytest.mark.parametrize("style", ["ompi", "ucx"])
def test_restore_leaves_a_patch_written_over_in_place_counts_and_names_it(
    run_python, style, noticed
) -> None:
    stderr = _restore_program(
        run_python,
        f"""
site = hooks.site("shmdt")
write_unused(site.patch_address, JUMPS["{style}"])
if {noticed}:
    memory.support_level()   # notices the overwrite: the backend forgets the site
outcomes = patcher.restore_all()
assert [o.record.symbol for o in outcomes if not o.restored] == ["shmdt"], outcomes
assert len(outcomes) > 1, outcomes   # the others were pmca's, and restored
assert not_ours.read() == 1, not_ours.read()
assert restored.read() == len(outcomes) - 1, restored.read()
assert hooks.prologue("shmdt", len(JUMPS["{style}"])) == JUMPS["{style}"]   # left alone
""",
    )
    said = [line for line in stderr.splitlines() if "patch no longer ours" in line]
    assert len(said) == 1 and "shmdt" in said[0], stderr


def test_restore_counts_original_bytes_written_back_as_restored(run_python) -> None:
    # Found overwritten with libc's own bytes, the patch is gone as restoring
    # it would leave it: restored, not "no longer ours", and nothing said.
    stderr = _restore_program(
        run_python,
        """
site = overwrite_with_original("shmdt")
memory.support_level()
outcomes = patcher.restore_all()
assert len(outcomes) > 1 and all(o.restored for o in outcomes), outcomes
assert (restored.read(), not_ours.read()) == (len(outcomes), 0)
assert hooks.prologue("shmdt", len(site.original)) == site.original
""",
    )
    assert "patch no longer ours" not in stderr, stderr
