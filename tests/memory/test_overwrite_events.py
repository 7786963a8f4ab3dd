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
