"""Concurrency, deadlock, fork and foreign-patch scenarios, each in a fresh process.

Every program starts multi-threaded (see conftest) and runs under a timeout:
a hang is a failure, not a stuck test run.
"""

from __future__ import annotations

import random

import pytest

pytestmark = pytest.mark.native

COMMON = """
import ctypes, mmap, os, random, sys, threading, time
import pmca.native as native
from pmca._libc import libc, PAGE, MADV_DONTNEED, MREMAP_MAYMOVE
hooks = native.backend()
c = libc()

def churn(stop, seed):
    # Every hooked call, through libc's real entry points, with the GIL released.
    rnd = random.Random(seed)
    while not stop.is_set():
        region = c.map_anonymous(4 * PAGE)
        c.madvise(region, PAGE, MADV_DONTNEED)
        region = c.mremap(region, 4 * PAGE, 8 * PAGE, MREMAP_MAYMOVE)
        c.map_anonymous(PAGE, address=region, fixed=True)
        c.munmap(region, 8 * PAGE)
        block = c.malloc(rnd.choice((64, 4096, 200_000, 1 << 20)))
        c.free(block)
"""


def test_install_restore_stress_against_threads_calling_the_targets(run_python):
    program = (
        COMMON
        + """
threads_count = int(sys.argv[1]) if len(sys.argv) > 1 else {threads}
before = {{s: hooks.prologue(s) for s in hooks.symbols}}
events = [0]
subscription = native.dispatcher().subscribe(lambda *e: events.__setitem__(0, events[0] + 1))
stop = threading.Event()
workers = [threading.Thread(target=churn, args=(stop, i)) for i in range(threads_count)]
for w in workers:
    w.start()
def hook_calls():
    return sum(hooks.calls(s) for s in hooks.symbols)

cycles = 0
calls_before = hook_calls()
deadline = time.monotonic() + 0.3
give_up = time.monotonic() + 20
# At least 20 full cycles however loaded the machine is; more while time allows,
# and until a worker called a target while it was patched: on a loaded machine
# 20 cycles can pass before any worker is scheduled at all.
while cycles < 20 or time.monotonic() < deadline or (
    hook_calls() == calls_before and time.monotonic() < give_up
):
    sites = [hooks.install(s) for s in hooks.symbols]
    if cycles >= 20 and hook_calls() == calls_before:
        time.sleep(0.001)  # let the workers in while the targets are patched
    for site in reversed(sites):
        assert hooks.restore(site), site
    cycles += 1
stop.set()
for w in workers:
    w.join()
subscription.unregister()
assert {{s: hooks.prologue(s) for s in hooks.symbols}} == before
assert cycles >= 20 and events[0] > 0, (cycles, events)
print("cycles", cycles, "events", events[0])
"""
    )
    rng = random.Random(0x5EED)
    for run in range(30):
        result = run_python(program.format(threads=rng.randint(4, 8)), timeout=30)
        assert "cycles" in result.stdout, f"run {run}: {result.stdout}{result.stderr}"


def test_a_subscriber_that_allocates_and_frees_heavily_does_not_deadlock(run_python):
    result = run_python(
        COMMON
        + """
sites = [hooks.install(s) for s in hooks.symbols]
calls = [0]
def heavy(address, length, kind, from_alloc):
    calls[0] += 1
    junk = [bytearray(4096) for _ in range(32)]
    block = c.malloc(300_000)          # an mmap'd chunk: its free is another event
    c.free(block)
    with mmap.mmap(-1, 1 << 20) as scratch:
        scratch.madvise(MADV_DONTNEED)
    del junk
subscription = native.dispatcher().subscribe(heavy)
stop = threading.Event()
workers = [threading.Thread(target=churn, args=(stop, i)) for i in range(4)]
for w in workers:
    w.start()
deadline = time.monotonic() + 1.0
while time.monotonic() < deadline:
    objects = [bytes(n % 7000) for n in range(2000)]
    del objects
    native.dispatcher().drain()
stop.set()
for w in workers:
    w.join()
subscription.unregister()
for site in reversed(sites):
    assert hooks.restore(site)
assert calls[0] > 0
print("callbacks", calls[0])
""",
        timeout=60,
    )
    assert "callbacks" in result.stdout


def test_malloc_trim_in_a_worker_while_main_allocates(run_python):
    result = run_python(
        COMMON
        + """
sites = [hooks.install(s) for s in hooks.symbols]
seen = [0]
def count(address, length, kind, from_alloc):
    seen[0] += 1
    _ = [0] * 256                      # the listener allocates too
subscription = native.dispatcher().subscribe(count)
stop = threading.Event()
trims = [0]
def trimmer():
    while not stop.is_set():
        c.malloc_trim(0)
        trims[0] += 1
worker = threading.Thread(target=trimmer)
worker.start()
rnd = random.Random(1)
deadline = time.monotonic() + 1.5
while time.monotonic() < deadline:
    blocks = [c.malloc(rnd.randrange(16, 300_000)) for _ in range(64)]
    for block in blocks:
        c.free(block)
    objects = [str(n) * 10 for n in range(1000)]
    del objects
stop.set()
worker.join()
subscription.unregister()
for site in reversed(sites):
    assert hooks.restore(site)
assert trims[0] > 0 and seen[0] > 0
print("trims", trims[0], "events", seen[0])
""",
        timeout=60,
    )
    assert "trims" in result.stdout


def test_a_forked_child_unmaps_and_drains(run_python):
    result = run_python(
        COMMON
        + """
import warnings
warnings.simplefilter("ignore", DeprecationWarning)  # fork with a listener thread alive
sites = [hooks.install(s) for s in hooks.symbols]
seen = []
subscription = native.dispatcher().subscribe(lambda *e: seen.append(e))
assert native.dispatcher().listening
stop = threading.Event()
churner = threading.Thread(target=churn, args=(stop, 7))
churner.start()               # other threads are mid-hook when we fork
time.sleep(0.05)
reader, writer = os.pipe()
pid = os.fork()
if pid == 0:
    code = 1
    try:
        assert native.dispatcher().listening  # subscribers came along: rule 3 holds here too
        del seen[:]
        region = c.map_anonymous(PAGE)
        c.munmap(region, PAGE)
        for _ in range(3):
            native.dispatcher().drain()
        got = [e for e in seen if e[2] == "munmap" and e[0] == region]
        os.write(writer, region.to_bytes(8, "little"))
        code = 0 if got else 2
    finally:
        os._exit(code)
stop.set()
churner.join()
_, status = os.waitpid(pid, 0)
assert os.waitstatus_to_exitcode(status) == 0, os.waitstatus_to_exitcode(status)
child_region = int.from_bytes(os.read(reader, 8), "little")
native.dispatcher().drain()
# The child's ring is its own memory: none of its events reach the parent.
assert not [e for e in seen if e[2] == "munmap" and e[0] == child_region and e[1] == PAGE]
# The parent still works after the fork.
region = c.map_anonymous(PAGE)
c.munmap(region, PAGE)
native.dispatcher().drain()
assert [e for e in seen if e[2] == "munmap" and e[0] == region]
subscription.unregister()
for site in reversed(sites):
    assert hooks.restore(site)
print("fork ok")
""",
        timeout=60,
    )
    assert "fork ok" in result.stdout


def test_a_shrinking_brk_is_reported_and_sbrk_stays_consistent(run_python):
    result = run_python(
        COMMON
        + """
site = hooks.install("brk")
# Moving the break is only safe while nothing else can malloc: no listener
# thread (a dispatcher that only delivers on drain()).
seen = []
dispatch = native.ReleaseDispatcher(listen=False)
subscription = dispatch.subscribe(lambda *e: seen.append(e))
assert threading.active_count() == 1
start = c.sbrk(0)
assert c.sbrk(64 * 1024) == start
assert c.sbrk(-64 * 1024) == start + 64 * 1024
assert c.sbrk(0) == start                  # __curbrk kept right by the hook
dispatch.drain()
assert (start, 64 * 1024, "brk", True) in seen, seen
grown = [e for e in seen if e[2] == "brk" and e[0] != start]
assert not grown, grown                     # growing the break releases nothing
subscription.unregister()
assert hooks.restore(site)
print("brk ok")
""",
        timeout=60,
    )
    assert "brk ok" in result.stdout


FOREIGN = """
libc_raw = ctypes.CDLL("libc.so.6", use_errno=True)
libc_raw.mprotect.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int]

# Someone else's munmap hook: `mov $SYS_munmap, %eax; syscall; ret`, on a
# page that is never unmapped (munmap of the page it runs from would fault).
libc_raw.mmap.restype = ctypes.c_void_p
libc_raw.mmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int, ctypes.c_int,
                          ctypes.c_int, ctypes.c_long]
code = libc_raw.mmap(None, PAGE, 7, 0x22, -1, 0)
ctypes.memmove(code, bytes.fromhex("b80b0000000f05c3"), 8)
target = code.to_bytes(8, "little")
JUMPS = {
    "ompi": b"\\x49\\xbb" + target + b"\\x41\\xff\\xe3",   # movabs %r11; jmp *%r11
    "ucx": b"\\x48\\xb8" + target + b"\\xff\\xe0",         # movabs %rax; jmp *%rax
}

def write_code(address, data):
    # Only ever done while this process has a single thread.
    assert threading.active_count() == 1
    page = address & ~(PAGE - 1)
    length = ((address + len(data) + PAGE - 1) & ~(PAGE - 1)) - page
    assert libc_raw.mprotect(page, length, 7) == 0
    ctypes.memmove(address, data, len(data))
    assert libc_raw.mprotect(page, length, 5) == 0
"""


@pytest.mark.parametrize("style", ["ompi", "ucx"])
def test_foreign_patch_before_us_is_refused_and_reported_missing(run_python, style):
    result = run_python(
        COMMON
        + FOREIGN
        + f"""
entry = hooks.address("munmap")
jump = JUMPS["{style}"]
write_code(entry, jump)
try:
    hooks.install("munmap")
except native.PatchRefused as refused:
    assert refused.symbol == "munmap" and refused.address == entry, refused
    assert refused.found.startswith(jump), refused
    assert "munmap" in str(refused) and hex(entry) in str(refused), refused
    assert "refusing to stack" in str(refused), refused
else:
    raise AssertionError("installed on top of a foreign patch")
assert native.self_test(["munmap"]) == {{"munmap": False}}
report = native.coverage()
assert report.hooks["munmap"].startswith("refused"), report.hooks
assert report["munmap"].outcome == "MISSED", report
assert report["free"].outcome == "MISSED", report
assert report["madvise"].caught and report["mremap"].caught, report
assert "munmap" in report.missed
assert hooks.prologue("munmap", len(jump)) == jump   # left exactly as found
print(report)
print("refused ok")
""",
        timeout=60,
    )
    assert "refused ok" in result.stdout


@pytest.mark.parametrize("style", ["ompi", "ucx"])
def test_foreign_patch_over_ours_is_left_alone_and_reported(run_python, style):
    result = run_python(
        COMMON
        + FOREIGN
        + f"""
site = hooks.install("munmap")
assert native.self_test(["munmap"]) == {{"munmap": True}}
jump = JUMPS["{style}"]
write_code(site.patch_address, jump)
assert not hooks.is_installed("munmap")
assert native.self_test(["munmap"]) == {{"munmap": False}}
assert hooks.restore(site) is False          # not ours any more: untouched
assert hooks.state("munmap") == "orphaned"
assert hooks.prologue("munmap", len(jump)) == jump
try:
    hooks.install("munmap")
except native.PatchRefused as refused:
    assert refused.symbol == "munmap"
else:
    raise AssertionError("installed on top of a foreign patch")
# munmap still works through the foreign hook.
region = c.map_anonymous(PAGE)
assert c.munmap(region, PAGE) == 0
print("orphaned ok")
""",
        timeout=60,
    )
    assert "orphaned ok" in result.stdout
