"""UCX loaded without MPI (``ctypes.CDLL`` of the wheel's libucs): the same promises.

Single processes, both orders and both finalize orders, plus what happens
when UCX's memory events are switched off and when pmca itself loads UCX.
"""

from __future__ import annotations

import json
import sys

import pytest

from .conftest import PROGRAM, results, run_program

pytestmark = pytest.mark.native


@pytest.mark.parametrize("finalize", ["pmca", "ucx"])
@pytest.mark.parametrize("order", ["ucx-first", "pmca-then-ucx"])
def test_ucx_loaded_by_ctypes(order, finalize, libucs, pmca_load_mode):
    result = run_program(
        [sys.executable, str(PROGRAM), order, pmca_load_mode, str(libucs)],
        env={"PMCA_TEST_FINALIZE": finalize},
    )
    assert len(results(result.stdout)) == 1, result.stdout


def test_ucx_memory_events_off_leaves_pmca_own_patches(run_python, libucs):
    result = run_python(
        f"""
        import ctypes
        from pmca import memory, native
        from pmca.session import Session
        hooks = native.backend()
        original = {{s: hooks.prologue(s) for s in hooks.symbols}}
        ctypes.CDLL({str(libucs)!r})  # UCX_MEM_EVENTS=no: UCX patches nothing
        assert {{s: hooks.prologue(s) for s in hooks.symbols}} == original
        with Session(frameworks=["memory"]) as s:
            assert [c.name for c in s.components("memory") if c.selected] == ["patcher"]
            handle = memory.register_release(lambda *e: None)
            assert memory.support_level() == memory.FREE | memory.MUNMAP
            handle.unregister()
        assert {{s: hooks.prologue(s) for s in hooks.symbols}} == original
        print("ok")
        """,
        env={"UCX_MEM_EVENTS": "no"},
    )
    assert "ok" in result.stdout


def test_memory_ucm_loads_ucx_itself_and_unsubscribes_at_close(run_python, libucs):
    result = run_python(
        f"""
        from pmca import memory, native
        from pmca._libc import PAGE, libc
        from pmca.session import Session
        assert not native.ucm_source().status().loaded
        seen = []
        mca = {{"memory": "ucm", "memory_ucm_library": {str(libucs)!r}}}
        with Session(mca=mca, frameworks=["memory"]):
            handle = memory.register_release(lambda a, n, k, f: seen.append((a, n, k)))
            assert native.ucm_source().subscribed
            assert memory.support_level() == memory.FREE | memory.MUNMAP
            region = libc().map_anonymous(PAGE)
            libc().munmap(region, PAGE)
            memory.drain()
            assert (region, PAGE, "vm_unmapped") in seen, seen[-5:]
            handle.unregister()
        assert not native.ucm_source().subscribed
        assert memory.support_level() == memory.Support.NONE
        print("ok")
        """
    )
    assert "ok" in result.stdout


def test_memory_ucm_with_events_off_says_why(run_python, libucs):
    result = run_python(
        f"""
        from pmca import memory
        from pmca.session import Session
        mca = {{"memory": "ucm", "memory_ucm_library": {str(libucs)!r}}}
        with Session(mca=mca, frameworks=["memory"]):
            try:
                memory.register_release(lambda *e: None)
            except memory.MemoryHooksUnavailable as exc:
                print("refused:", exc)
        """,
        env={"UCX_MEM_EVENTS": "no"},
    )
    assert "refused:" in result.stdout and "UCX_MEM_EVENTS=no" in result.stdout, result.stdout


def test_doctor_runs_the_release_paths_with_ucx_loaded(libucs):
    result = run_program([sys.executable, "-m", "pmca.cli", "doctor", "--quick", "--json"])
    report = json.loads(result.stdout)
    section = next(s for s in report["sections"] if "with UCX loaded" in s["title"])
    assert section["data"]["sources"]["ucm"].startswith("subscribed to VM_UNMAPPED of")
    assert section["data"]["sources"]["own patches"].startswith("none (refused:")
    paths = section["data"]["paths"]
    for name in ("free", "realloc", "munmap", "madvise", "mremap", "mmap_fixed", "shmdt"):
        assert paths[name]["caught"] is True, (name, paths[name])
        assert paths[name]["kinds"] == ["vm_unmapped"], (name, paths[name])
    plain = next(s for s in report["sections"] if s["title"] == "Native hook coverage")
    assert plain["data"]["paths"]["munmap"]["kinds"] == ["munmap"]


def test_fork_while_draining_from_ucm(run_python, libucs):
    result = run_python(
        f"""
        import ctypes, os, signal
        ctypes.CDLL({str(libucs)!r})
        from pmca import memory
        from pmca._libc import PAGE, libc
        from pmca.session import Session
        seen = []
        stop = threading.Event()

        def drain_forever():
            while not stop.is_set():
                memory.drain()  # the overwrite/guard check takes native locks

        with Session(frameworks=["memory"]):
            handle = memory.register_release(lambda a, n, k, f: seen.append(a))
            drainer = threading.Thread(target=drain_forever)
            drainer.start()
            for _ in range(20):
                pid = os.fork()
                if pid == 0:
                    signal.alarm(20)  # a hung child dies instead of outliving the test
                    region = libc().map_anonymous(PAGE)
                    libc().munmap(region, PAGE)
                    memory.drain()
                    os._exit(0 if region in seen else 3)
                _, status = os.waitpid(pid, 0)
                assert os.waitstatus_to_exitcode(status) == 0, status
            stop.set()
            drainer.join()
            handle.unregister()
        print("fork ok")
        """,
        timeout=120,
    )
    assert "fork ok" in result.stdout


def test_a_change_under_ucm_s_hooks_raises_the_overwrite_event(run_python, libucs):
    """memory/patcher switched to ucm (UCX wrote over its patches), then a prologue
    ucm's hooks live in changes: ``memory_patcher_overwrite`` again, naming no patch
    of pmca's (none is left) and who holds the changed function now."""
    from ..memory.test_overwrite_events import END, SESSION
    from ..native.test_processes import COMMON, FOREIGN

    result = run_python(
        COMMON
        + FOREIGN
        + SESSION
        + f"""
ctypes.CDLL({str(libucs)!r})      # UCX writes its jumps over pmca's patches
memory.support_level()            # noticed (as the next drain would): ucm from now on
assert session.modules("memory")[0].source == "ucm", session.modules("memory")[0].source
assert len(events) == 1 and events[0]["symbols"], events
assert detected.read() == 1
write_unused(hooks.address("shmdt"), JUMPS["ompi"])   # under ucm's guard now
memory.support_level()
assert len(events) == 2, events
assert events[1]["symbols"] == (), events[1]
assert "shmdt" in events[1]["foreign"], events[1]
assert events[1]["foreign"]["shmdt"].found.startswith(JUMPS["ompi"]), events[1]
assert detected.read() == 2
memory.drain()
assert len(events) == 2           # reported once
"""
        + END,
        timeout=120,
    )
    assert "event ok" in result.stdout, result.stdout + result.stderr


def test_a_change_under_another_user_s_ucm_subscription_is_not_the_patcher_s(run_python, libucs):
    """UCX loaded with its hooks in the linker's tables (``reloc``: libc's prologues
    untouched) while memory/patcher's own patches deliver, and subscribed to by
    another user of ``pmca.native.ucm_source()``: a change in a prologue that
    subscription guards, past pmca's jump, is noticed, but pmca's patches are
    intact and the patcher does not use ucm: no overwrite event, no switch."""
    from ..memory.test_overwrite_events import END, SESSION
    from ..native.test_processes import COMMON, FOREIGN

    result = run_python(
        COMMON
        + FOREIGN
        + SESSION
        + f"""
ctypes.CDLL({str(libucs)!r})      # reloc mode: pmca's patches stay
memory.support_level()
assert session.modules("memory")[0].source == "own patches", session.modules("memory")[0].source
source = native.ucm_source()
source.acquire()                  # another user: ucm's prologues are guarded from now on
site = hooks.site("shmdt")
past_the_jump = site.patch_address + len(site.patched)
kept = ctypes.string_at(past_the_jump, 1)
write_unused(past_the_jump, bytes([kept[0] ^ 0xFF]))
memory.support_level()            # noticed (as the next drain would)
assert detected.read() == 1
assert hooks.is_installed("shmdt")
assert events == [], events
assert session.modules("memory")[0].source == "own patches", session.modules("memory")[0].source
source.release()
write_unused(past_the_jump, kept)
"""
        + END,
        timeout=120,
        env={"UCX_MEM_MMAP_HOOK_MODE": "reloc"},
    )
    assert "event ok" in result.stdout, result.stdout + result.stderr


def test_memory_ucm_pvars_and_its_overwrite_event(run_python, libucs):
    """memory/ucm has its support STATE, the ring's counters under its names, and
    ``memory_ucm_overwrite`` when the prologues UCX's hooks live in change:
    here another library writes shmdt's own first bytes back over UCX's jump
    (valid code, and nothing in this process calls shmdt)."""
    result = run_python(
        f"""
        import ctypes
        from pmca import memory, native
        from pmca._libc import PAGE, libc
        from pmca.mca import Safety
        from pmca.session import Session
        hooks = native.backend()
        libc_raw = ctypes.CDLL("libc.so.6")
        libc_raw.mprotect.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int]
        address = hooks.address("shmdt")
        original = hooks.prologue("shmdt", 5)
        mca = {{"memory": "ucm", "memory_ucm_library": {str(libucs)!r}}}
        with Session(mca=mca, frameworks=["memory"]) as s:
            events = []
            listening = s.register_event(
                "memory_ucm_overwrite", lambda n, f: events.append(dict(f)), Safety.THREAD_SAFE
            )
            ps = s.pvar_session()
            support = ps.handle("memory_ucm_support")
            delivered = ps.handle("memory_ucm_events_delivered")
            detected = ps.handle("memory_ucm_overwrites_detected")
            assert support.read() == 0  # nothing subscribed yet
            handle = memory.register_release(lambda *e: None)
            assert support.read() == int(memory.FREE | memory.MUNMAP), support.read()
            region = libc().map_anonymous(PAGE)
            libc().munmap(region, PAGE)
            memory.drain()
            assert delivered.read() >= 1
            assert hooks.prologue("shmdt", 5) != original, "UCX did not patch shmdt"
            page = address & ~(PAGE - 1)
            assert libc_raw.mprotect(page, 2 * PAGE, 7) == 0
            ctypes.memmove(address, original, len(original))
            assert libc_raw.mprotect(page, 2 * PAGE, 5) == 0
            level = memory.support_level()  # notices the change (as the next drain would)
            assert len(events) == 1, events
            assert events[0]["symbols"] == () and "foreign" in events[0], events
            assert detected.read() == 1
            assert support.read() == int(level)  # tested again after the change
            memory.drain()
            assert len(events) == 1  # reported once
            listening.unregister()
            handle.unregister()
        assert support.read() == 0
        print("ok")
        """,
        timeout=120,
    )
    assert "ok" in result.stdout, result
    assert "UCX's ucm hooks changed" in result.stderr, result.stderr
