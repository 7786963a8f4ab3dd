"""Release-event delivery under concurrency: order, completeness, epochs, overflow, fork.

Each scenario runs in a fresh interpreter (multi-threaded first, see
conftest) under a timeout: a hang or a crash fails the test.  Stress loops
are bounded by counts, never by assertions on time.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, NamedTuple

import pytest

pytestmark = pytest.mark.native

PRELUDE = """
import collections, ctypes, mmap, os, sys, threading, time, warnings
import pmca.native as native
from pmca._libc import libc, PAGE
hooks = native.backend()
c = libc()
lib = native._abi.load()
PROT_RW = 3
MAP_PRIVATE_ANON = 0x22
MAP_FIXED_NOREPLACE = 0x100000

class Recorder:
    def __init__(self):
        self.events = []
        self.busy = False
        self.overlaps = 0
    def __call__(self, address, length, kind, from_alloc):
        if self.busy:
            self.overlaps += 1          # the same subscriber on two threads at once
        self.busy = True
        self.events.append((address, length, kind))
        time.sleep(0)                   # yield the GIL mid-delivery
        self.busy = False

# A list that a new subscription of dispatch fills with every event, and the subscription.
def collect(dispatch):
    events = []
    return events, dispatch.subscribe(lambda *event: events.append(event))
"""


class Scenario(NamedTuple):
    """A child program: it must exit 0 within ``timeout`` seconds and print ``expect``.

    ``empty_files`` name files in the scenario's directory (``SCENARIO_DIR``
    in the child's environment) that must still be empty once it has exited.
    """

    program: str
    expect: str
    timeout: float = 60
    empty_files: tuple[str, ...] = ()


SCENARIOS = {
    "an_event_is_published_before_the_memory_is_released": Scenario(
        # Thread A unmaps; thread B maps the same address as soon as the kernel
        # lets it (MAP_FIXED_NOREPLACE fails while A's mapping exists), then
        # drains.  The event must already be there: published after the
        # syscall, it would sometimes not be.
        """
site = hooks.install("munmap")
seen = set()
dispatch = native.ReleaseDispatcher(listen=False)
subscription = dispatch.subscribe(lambda a, l, k, f: seen.add(a) if k == "munmap" else None)
handoff = [0]
ready = threading.Event()
done = threading.Event()
TRIALS = 3000
stale = 0
def unmapper():
    for _ in range(TRIALS):
        region = c.map_anonymous(4 * PAGE)
        handoff[0] = region
        ready.set()
        c.munmap(region, 4 * PAGE)
        done.wait()
        done.clear()
thread = threading.Thread(target=unmapper)
thread.start()
for _ in range(TRIALS):
    ready.wait()
    ready.clear()
    region = handoff[0]
    while True:
        try:
            mine = c.mmap(region, 4 * PAGE, PROT_RW, MAP_PRIVATE_ANON | MAP_FIXED_NOREPLACE)
        except OSError:
            continue                     # A has not unmapped yet
        break
    assert mine == region
    dispatch.drain()
    if region not in seen:
        stale += 1
    seen.clear()
    c.munmap(mine, 4 * PAGE)
    done.set()
thread.join()
subscription.unregister()
hooks.restore(site)
print("stale", stale)
assert stale == 0, stale
""",
        expect="stale 0",
        timeout=120,
    ),
    "a_producer_stalled_mid_publish_makes_the_drain_incomplete_not_stuck": Scenario(
        """
recorder = Recorder()
dispatch = native.ReleaseDispatcher(listen=False, stall_wait_ns=50_000_000, max_lag=600)
subscription = dispatch.subscribe(recorder)
before = native.stats()
release = ctypes.c_int(0)
outcome = []
def stall():
    outcome.append(lib.pmca_hooks_publish_stalled(0xdead000, PAGE, ctypes.byref(release)))
stalled = threading.Thread(target=stall)
stalled.start()
while hooks.ring_state().published == before.published:
    time.sleep(0.001)                 # the stalled producer holds its claim (no hook installed yet)
site = hooks.install("munmap")
region = c.map_anonymous(PAGE)
c.munmap(region, PAGE)                # published behind the stalled slot
dispatch.drain()                      # bounded: gives the stalled slot up
assert (region, PAGE, "munmap") in recorder.events, "events behind the stall were not delivered"
assert (0, native.END_OF_MEMORY, "overflow") in recorder.events, "the lost event was not announced"
after = native.stats()
assert after.incomplete_drains == before.incomplete_drains + 1
assert after.dropped == before.dropped + 1
release.value = 1
stalled.join(10)
assert outcome == [0], outcome        # its slot had been given up: not published late
hooks.restore(site)
subscription.unregister()
# The slot is usable again: a whole lap of the ring goes through it without a drop.
fast = []
lap = dispatch.subscribe(lambda a, l, k, f: fast.append(a))
for _ in range(5):
    hooks.publish_synthetic(hooks.capacity // 4, address=0x10000000)
    dispatch.drain()
lap.unregister()
assert native.stats().dropped == after.dropped
synthetic = [a for a in fast if 0x10000000 <= a < 0x10000000 + hooks.capacity * PAGE]
assert len(synthetic) == 5 * (hooks.capacity // 4), len(synthetic)
# A stall shorter than the bound is waited for: delivered, no overflow.
patient = native.ReleaseDispatcher(listen=False, stall_wait_ns=20_000_000_000, max_lag=600)
late, p = collect(patient)
release.value = 0
slow = threading.Thread(
    target=lib.pmca_hooks_publish_stalled, args=(0xbeef000, PAGE, ctypes.byref(release))
)
mark = hooks.ring_state().published
slow.start()
while hooks.ring_state().published == mark:
    time.sleep(0.001)
threading.Timer(0.01, lambda: setattr(release, "value", 1)).start()
patient.drain()                       # waits (GIL released) until the producer publishes
slow.join(10)
p.unregister()
assert (0xbeef000, PAGE, "munmap", True) in late, late
assert not [e for e in late if e[2] == "overflow"]
print("stall ok")
""",
        expect="stall ok",
        timeout=120,
    ),
    "drain_delivers_everything_before_returning_even_when_callbacks_yield": Scenario(
        # The listener delivers concurrently; the callback takes a lock, logs and
        # yields the GIL.  Every drain() must return with all its events delivered.
        """
import logging
logging.basicConfig(stream=sys.stderr, level=logging.WARNING)
log = logging.getLogger("cache")
site = hooks.install("munmap")
lock = threading.Lock()
seen = set()
def on_release(address, length, kind, from_alloc):
    with lock:
        seen.add(address)
        log.debug("released %x", address)
    time.sleep(0)
# Its own dispatcher (with a listener): patient, so that a loaded machine
# cannot turn a slow round into an overflow notice.
dispatch = native.ReleaseDispatcher(max_lag=600)
subscription = dispatch.subscribe(on_release)
assert dispatch.listening
short = 0
for round_ in range(20):
    released = []
    for _ in range(500):
        region = c.map_anonymous(PAGE)
        c.munmap(region, PAGE)
        released.append(region)
    dispatch.drain()
    with lock:
        missing = [r for r in released if r not in seen]
        seen.clear()
    short += bool(missing)
    assert not missing, (round_, len(missing))
subscription.unregister()
hooks.restore(site)
print("complete", short)
""",
        expect="complete 0",
        timeout=120,
    ),
    "four_threads_draining_deliver_each_event_once_per_subscriber": Scenario(
        """
first, second = Recorder(), Recorder()
dispatch = native.ReleaseDispatcher(max_lag=600)   # with a listener; patient (see above)
subscriptions = [dispatch.subscribe(first), dispatch.subscribe(second)]
base = [0x100000000]
base_lock = threading.Lock()
published = collections.Counter()
def worker(seed):
    for i in range(300):
        with base_lock:
            start = base[0]
            base[0] += 1 << 24
        count = 1 + (seed * 7 + i) % 50
        got = hooks.publish_synthetic(count, address=start, length=PAGE, stride=PAGE)
        assert got == count
        dispatch.drain()
workers = [threading.Thread(target=worker, args=(n,)) for n in range(4)]
for w in workers:
    w.start()
for w in workers:
    w.join(100)
    assert not w.is_alive(), "a drain hung"
dispatch.drain()
for s in subscriptions:
    s.unregister()
for recorder in (first, second):
    counts = collections.Counter(e[0] for e in recorder.events if e[0] >= 0x100000000)
    assert counts and max(counts.values()) == 1, max(counts.values())
    # In ring order: each publishing call's events arrive in the order published.
    runs = collections.defaultdict(list)
    for e in recorder.events:
        if e[0] >= 0x100000000:
            runs[e[0] >> 24].append(e[0])
    assert all(run == sorted(run) for run in runs.values())
    assert recorder.overlaps == 0, recorder.overlaps
    assert not [e for e in recorder.events if e[2] == "overflow"]
assert len(first.events) == len(second.events)
print("once", len(first.events))
""",
        expect="once",
        timeout=180,
    ),
    "a_new_subscriber_sees_only_what_is_published_after_it_subscribed": Scenario(
        """
dispatch = native.ReleaseDispatcher(listen=False)
early = Recorder()
s1 = dispatch.subscribe(early)
hooks.publish_synthetic(10, address=0x1000000)
late = Recorder()
s2 = dispatch.subscribe(late)           # after those 10, before they are drained
hooks.publish_synthetic(5, address=0x2000000)
dispatch.drain()
assert len(early.events) == 15 and len(late.events) == 5, (len(early.events), len(late.events))
assert all(e[0] >= 0x2000000 for e in late.events)
# Lost events before it subscribed are not announced to it either.
hooks.publish_synthetic(hooks.capacity + 5, address=0x3000000)   # overflows
newest = Recorder()
s3 = dispatch.subscribe(newest)
dispatch.drain()
assert [e for e in early.events if e[2] == "overflow"]
assert not newest.events, newest.events[:3]
for s in (s1, s2, s3):
    s.unregister()
print("epochs ok")
""",
        expect="epochs ok",
    ),
    "batched_subscribers_get_columns_and_the_overflow_flag": Scenario(
        """
dispatch = native.ReleaseDispatcher(listen=False, max_lag=600)
batches = []
def on_batch(batch):
    batches.append((len(batch), batch.overflow, batch.addresses.tolist(), batch.lengths.tolist(),
                    [native.KIND_NAMES[k] for k in batch.kinds.tolist()], list(batch)))
s = dispatch.subscribe(on_batch, batch=True)
hooks.publish_synthetic(3, address=0x5000, length=PAGE, stride=PAGE)
dispatch.drain()
(count, overflow, addresses, lengths, kinds, items), = batches
assert (count, overflow) == (3, False)
assert addresses == [0x5000, 0x6000, 0x7000] and lengths == [PAGE] * 3 and kinds == ["munmap"] * 3
assert items[0] == (0x5000, PAGE, "munmap", True)
del batches[:]
hooks.publish_synthetic(hooks.capacity + 1)
dispatch.drain()
assert batches[0][1] is True                  # overflow flagged on the first batch
assert sum(b[0] for b in batches) == hooks.capacity
s.unregister()
print("batch ok")
""",
        expect="batch ok",
    ),
    "the_listener_survives_any_exception_and_reports_it": Scenario(
        """
warnings.simplefilter("always")
caught = []
warnings.showwarning = lambda message, *rest: caught.append(str(message))
site = hooks.install("munmap")
got = threading.Event()
def exits(*event):
    raise SystemExit("callback said exit")
def interrupts(*event):
    raise KeyboardInterrupt
def watcher(address, length, kind, from_alloc):
    if length == 7 * PAGE:
        got.set()
subs = [native.dispatcher().subscribe(cb) for cb in (exits, interrupts, watcher)]
region = c.map_anonymous(7 * PAGE)
c.munmap(region, 7 * PAGE)
assert got.wait(30), "the listener stopped delivering"
assert native.dispatcher().listening
got.clear()
region = c.map_anonymous(7 * PAGE)
c.munmap(region, 7 * PAGE)
assert got.wait(30), "the listener stopped after the first failures"
errors = native.stats().callback_errors
assert errors >= 4, errors
assert any("SystemExit" in m and "Traceback" in m and "exits" in m for m in caught), caught[:2]
for s in subs:
    s.unregister()
# On a drain() caller, KeyboardInterrupt is re-raised, after the others got their events.
dispatch = native.ReleaseDispatcher(listen=False)
a = dispatch.subscribe(interrupts)
seen, b = collect(dispatch)
hooks.publish_synthetic(3)
try:
    dispatch.drain()
except KeyboardInterrupt:
    interrupted = True
else:
    interrupted = False
assert interrupted and len(seen) == 3, (interrupted, seen)
a.unregister(); b.unregister()
hooks.restore(site)
print("listener ok")
""",
        expect="listener ok",
        timeout=120,
    ),
    "a_listener_that_cannot_start_leaves_nothing_subscribed": Scenario(
        """
real_start = threading.Thread.start
def refuse(self):
    if self.name == "pmca-release-listener":
        raise RuntimeError("can't start new thread")
    real_start(self)
threading.Thread.start = refuse
for _ in range(100):
    try:
        native.dispatcher().subscribe(lambda *e: None)
    except RuntimeError:
        pass
    else:
        raise AssertionError("subscribe() succeeded without a listener")
assert native.dispatcher().subscriber_count == 0
threading.Thread.start = real_start
s = native.dispatcher().subscribe(lambda *e: None)
assert native.dispatcher().subscriber_count == 1 and native.dispatcher().listening
s.unregister()
print("clean")
""",
        expect="clean",
    ),
    "drain_from_inside_callbacks_while_threads_drain_does_not_deadlock": Scenario(
        """
dispatch = native.dispatcher()
calls = [0]
def nested(*event):
    calls[0] += 1
    if calls[0] % 50 == 0:
        dispatch.drain()                  # never waits for other threads' callbacks
subs = [dispatch.subscribe(nested), dispatch.subscribe(nested)]
def worker():
    for _ in range(200):
        hooks.publish_synthetic(20)
        dispatch.drain()
threads = [threading.Thread(target=worker) for _ in range(3)]
for t in threads:
    t.start()
for t in threads:
    t.join(100)
    assert not t.is_alive(), "deadlock"
for s in subs:
    s.unregister()
assert calls[0] >= 2 * 3 * 200 * 20
print("nested ok", calls[0])
""",
        expect="nested ok",
        timeout=150,
    ),
    "a_forked_child_gets_an_overflow_for_events_pending_at_fork": Scenario(
        """
warnings.simplefilter("ignore", DeprecationWarning)
dispatch = native.ReleaseDispatcher(listen=False)
seen, s = collect(dispatch)
hooks.publish_synthetic(100)             # pending, never drained in the parent before fork
pid = os.fork()
if pid == 0:
    code = 3
    try:
        dispatch.drain()
        kinds = [e[2] for e in seen]
        # The child's ring discarded them: one overflow notice, no events.
        code = 0 if kinds == ["overflow"] else 2
        hooks.publish_synthetic(5, address=0x7000000)
        dispatch.drain()
        code = code or (0 if len(seen) == 6 else 4)
    finally:
        os._exit(code)
_, status = os.waitpid(pid, 0)
assert os.waitstatus_to_exitcode(status) == 0, os.waitstatus_to_exitcode(status)
dispatch.drain()
assert len(seen) == 100 and not [e for e in seen if e[2] == "overflow"]
s.unregister()
print("fork ok")
""",
        expect="fork ok",
    ),
    "closerange_of_every_fd_breaks_nothing": Scenario(
        """
warnings.simplefilter("ignore", DeprecationWarning)
sites = [hooks.install(s) for s in hooks.symbols]
seen, s = collect(native.dispatcher())
os.closerange(3, 65536)                # what daemonizing code does
target = os.path.join(os.environ["SCENARIO_DIR"], "application.log")
fd = os.open(target, os.O_RDWR | os.O_CREAT | os.O_TRUNC)
reader, writer = os.pipe()
os.write(writer, b"application data")
for _ in range(2000):
    region = c.map_anonymous(PAGE)
    c.munmap(region, PAGE)
native.dispatcher().drain()
time.sleep(0.2)                        # give a listener time to misbehave
assert os.fstat(fd).st_size == 0, "pmca wrote into an application file"
assert os.read(reader, 100) == b"application data", "pmca took data from an application pipe"
inode = os.fstat(fd).st_ino
pid = os.fork()
if pid == 0:
    ok = os.fstat(fd).st_ino == inode and os.fstat(fd).st_size == 0
    region = c.map_anonymous(PAGE)
    c.munmap(region, PAGE)
    os._exit(0 if ok and os.fstat(fd).st_size == 0 else 1)
_, status = os.waitpid(pid, 0)
assert os.waitstatus_to_exitcode(status) == 0, "the child's descriptors were touched"
assert len(seen) >= 2000
s.unregister()                          # finalize must not hang
for site in reversed(sites):
    assert hooks.restore(site)
print("fds ok")
""",
        expect="fds ok",
        empty_files=("application.log",),
    ),
    "every_hook_publishes_before_its_system_call": Scenario(
        # Deterministic twin of the race above: a call the kernel rejects still
        # leaves its event, because the event went out before the call was made
        # (an implementation that published after a successful call would leave
        # none).  brk is left out: a rejected shrink cannot be provoked safely.
        """
import errno as E
from pmca._libc import MADV_DONTNEED, MREMAP_MAYMOVE
sites = [hooks.install(s) for s in ("munmap", "madvise", "mremap", "mmap", "shmdt")]
dispatch = native.ReleaseDispatcher(listen=False)
seen, s = collect(dispatch)
odd = c.map_anonymous(2 * PAGE) + 1                  # not page-aligned: EINVAL everywhere
def rejected(call):
    try:
        return call() == -1
    except OSError:
        return True
outcomes = {
    "munmap": rejected(lambda: c.munmap(odd, PAGE)),
    "madvise": rejected(lambda: c.madvise(odd, PAGE, MADV_DONTNEED)),
    "mremap": rejected(lambda: c.mremap(odd, PAGE, 2 * PAGE, MREMAP_MAYMOVE)),
    "mmap_fixed": rejected(lambda: c.mmap(odd, PAGE, 3, 0x22 | 0x10)),
    "shmdt": rejected(lambda: c.shmdt(odd)),
}
dispatch.drain()
kinds = {e[2] for e in seen if e[0] == odd}
s.unregister()
for site in reversed(sites):
    assert hooks.restore(site)
assert all(outcomes.values()), outcomes            # the kernel refused every one
assert kinds == set(outcomes), kinds
print("before ok")
""",
        expect="before ok",
    ),
    "a_subscriber_far_behind_gets_an_overflow_instead_of_its_backlog": Scenario(
        """
dispatch = native.ReleaseDispatcher(listen=False, max_lag=0.5)
seen = []
def slow(address, length, kind, from_alloc):
    seen.append(kind)
    time.sleep(0.005)                    # 15 s for all 3000: far more than max_lag
s = dispatch.subscribe(slow)
fast, f = collect(dispatch)
before = native.stats().lagged
hooks.publish_synthetic(3000)
dispatch.drain()
assert "overflow" in seen and len(seen) < 3000, len(seen)
assert len(fast) == 3000 and not [e for e in fast if e[2] == "overflow"]
s.unregister(); f.unregister()
print("lag ok")
""",
        expect="lag ok",
    ),
}


@pytest.mark.parametrize("name", list(SCENARIOS))
def test_delivery(run_python: Any, tmp_path: Path, name: str) -> None:
    scenario = SCENARIOS[name]
    result = run_python(
        PRELUDE + scenario.program,
        timeout=scenario.timeout,
        env={"SCENARIO_DIR": str(tmp_path)},
    )
    assert scenario.expect in result.stdout, result.stdout[-2000:]
    for file in scenario.empty_files:
        assert (tmp_path / file).read_bytes() == b"", f"{file} was written to"
