"""Someone writes over pmca's installed patch: noticed, reported once, treated as overflow.

Each scenario runs in a fresh (multi-threaded) process with no UCX loaded,
so there is nothing to switch to: ``support_level()`` must drop to what is
really still caught.
"""

from __future__ import annotations

import pytest

from ..native.test_processes import COMMON

pytestmark = pytest.mark.native

#: ``overwrite_with_original(symbol)``, for child programs starting with COMMON.
OVERWRITE = """
def overwrite_with_original(symbol):
    # What a patcher that restores "its" saved bytes over ours does: a
    # 2-byte store (our jump never straddles a cache line).
    site = hooks.site(symbol)
    libc_raw = ctypes.CDLL("libc.so.6")
    libc_raw.mprotect.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int]
    page = site.patch_address & ~(PAGE - 1)
    assert libc_raw.mprotect(page, 2 * PAGE, 7) == 0
    ctypes.memmove(site.patch_address, site.original, 2)
    assert libc_raw.mprotect(page, 2 * PAGE, 5) == 0
    return site
"""

SESSION = (
    """
from pmca import memory
from pmca.session import Session
seen = []
session = Session(frameworks=["memory"])
session.__enter__()
handle = memory.register_release(lambda a, n, k, f: seen.append((a, n, k)))
assert memory.support_level() == memory.FREE | memory.MUNMAP
"""
    + OVERWRITE
)


def test_overwritten_munmap_drops_support_and_reports_overflow_once(run_python):
    result = run_python(
        COMMON
        + SESSION
        + """
site = overwrite_with_original("munmap")
mark = len(seen)
# Asked before any drain, the level is already truthful: munmap is lost.
assert memory.support_level() == memory.Support.NONE, memory.support_level()
memory.drain()
assert ("overflow" in [k for _, _, k in seen[mark:]]), seen[mark:]
# Reported once: later checks find nothing new.
assert native.check_overwrites() is None
assert memory.support_level() == memory.Support.NONE
handle.unregister()
session.__exit__(None, None, None)
assert hooks.prologue("munmap", 2) == site.original   # not ours: left as found
print("overwrite ok")
""",
        timeout=60,
    )
    assert "overwrite ok" in result.stdout
    assert result.stderr.count("memory hooks overwritten") == 1, result.stderr
    assert "munmap" in result.stderr


def test_overwritten_shmdt_keeps_free_and_munmap(run_python):
    result = run_python(
        COMMON
        + SESSION
        + """
overwrite_with_original("shmdt")
assert memory.support_level() == memory.FREE | memory.MUNMAP
overwrite = native.check_overwrites()
assert overwrite is None   # already consumed by support_level()
region = c.map_anonymous(PAGE)
c.munmap(region, PAGE)
memory.drain()
assert (region, PAGE, "munmap") in seen
handle.unregister()
session.__exit__(None, None, None)
print("shmdt ok")
""",
        timeout=60,
    )
    assert "shmdt ok" in result.stdout
    assert result.stderr.count("memory hooks overwritten") == 1, result.stderr


def test_a_closed_session_no_longer_answers_for_the_next_one_s_hooks(run_python):
    # The first session's module stops watching at its close: an overwrite in
    # the second session is reported once, by the second session's module.
    result = run_python(
        COMMON
        + SESSION
        + """
handle.unregister()
session.__exit__(None, None, None)
session = Session(frameworks=["memory"])
session.__enter__()
handle = memory.register_release(lambda a, n, k, f: None)
overwrite_with_original("shmdt")
assert memory.support_level() == memory.FREE | memory.MUNMAP
handle.unregister()
session.__exit__(None, None, None)
print("second ok")
""",
        timeout=60,
    )
    assert "second ok" in result.stdout
    assert result.stderr.count("memory hooks overwritten") == 1, result.stderr
