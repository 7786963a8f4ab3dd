"""A program that exits with a session still active leaves libc as it found it.

The check runs in the child's last exit handler, registered before pmca is
imported (exit handlers run last registered first), so it sees libc after
pmca's own handler.
"""

from __future__ import annotations

import pytest

from pmca.testing import run_python

PROLOGUE = """
import atexit, ctypes, os, sys
SYMBOLS = ("munmap", "madvise", "mremap", "brk", "shmdt", "mmap")
_libc = ctypes.CDLL("libc.so.6")
def entries():
    return {s: ctypes.string_at(ctypes.cast(getattr(_libc, s), ctypes.c_void_p).value, 16)
            for s in SYMBOLS}
baseline = entries()
sites = []
def check_at_exit():
    changed = [s for s, b in entries().items() if b != baseline[s]]
    changed += [hex(a) for a, original in sites if ctypes.string_at(a, len(original)) != original]
    print(f"{os.getpid()}:", "RESTORED" if not changed else f"STILL PATCHED {changed}", flush=True)
atexit.register(check_at_exit)

import pmca
session = pmca.Session(frameworks=["memory"]).init()
handle = pmca.memory.register_release(lambda *event: None)
sites[:] = [(r.address, r.original) for r in pmca.patcher.current().patches()]
assert entries() != baseline, "nothing was patched"
"""

ENDINGS = {
    "return": "",
    "sys.exit": "sys.exit(3)",
    "uncaught": "raise RuntimeError('the program failed')",
}


@pytest.mark.parametrize("ending", ENDINGS)
def test_exit_with_an_active_session_restores_libc(ending: str, pmca_load_mode: str) -> None:
    result = run_python(PROLOGUE + ENDINGS[ending], timeout=120)
    assert "RESTORED" in result.stdout, result.stdout + result.stderr[-3000:]
    assert result.returncode == {"return": 0, "sys.exit": 3, "uncaught": 1}[ending]
    assert "pmca:" not in result.stderr, result.stderr  # finalize at exit met no error


FORKED = """
pid = os.fork()
if pid == 0:
    sys.exit(0)  # the child's copy of the session: only its patches are undone
os.waitpid(pid, 0)
handle.unregister()
session.finalize()
"""


def test_a_fork_child_exiting_restores_its_own_copy_of_libc(pmca_load_mode: str) -> None:
    result = run_python(PROLOGUE + FORKED, timeout=120)
    assert result.returncode == 0, result.stderr[-3000:]
    lines = [line for line in result.stdout.splitlines() if line.endswith("RESTORED")]
    assert len(lines) == 2, result.stdout + result.stderr[-3000:]  # child and parent
