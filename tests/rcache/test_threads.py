"""grdma under threads: registering, deregistering and releasing all at once (in a child)."""

from __future__ import annotations

import json

from pmca.testing._subprocess import run_python

from .conftest import needs_native

pytestmark = needs_native

CHILD = """
import json, random, threading, time
import pmca
from pmca.rcache import UnpinnedBackend
from tests.rcache.conftest import Pool
from pmca._libc import PAGE

pool = Pool(64)
errors = []
with pmca.Session():
    backend = UnpinnedBackend()
    rc = pmca.rcache.create("grdma", backend, leave_pinned=True, cache_max_bytes=16 * PAGE)
    stop = threading.Event()
    released = [0]

    def let_releases_in():
        # Under load one thread can keep the GIL for a whole run of operations:
        # wait (boundedly) until the releaser got a turn, so that releases
        # really land between registrations instead of before or after them.
        target = released[0] + 1
        deadline = time.monotonic() + 60
        while released[0] < target:
            if time.monotonic() > deadline:
                errors.append("the releaser made no progress for 60 s")
                return
            time.sleep(0.0005)

    def worker(seed):
        rng = random.Random(seed)
        held = []
        try:
            for step in range(1500):
                if step % 50 == 0:
                    let_releases_in()
                if held and rng.random() < 0.5:
                    rc.deregister(held.pop(rng.randrange(len(held))))
                else:
                    address = pool.page(rng.randrange(60)) + rng.randrange(PAGE)
                    size = rng.randrange(1, 3 * PAGE)
                    reg = rc.register(address, size)
                    if not reg.covers(address, size) or reg.refcount < 1:
                        errors.append(repr(reg))
                    held.append(reg)
            for reg in held:
                rc.deregister(reg)
        except Exception as exc:
            errors.append(repr(exc))

    def releaser():
        rng = random.Random(99)
        while not stop.is_set():
            pool.release(rng.randrange(60), rng.randrange(1, 4))
            released[0] += 1

    workers = [threading.Thread(target=worker, args=(n,)) for n in range(4)]
    noise = threading.Thread(target=releaser)
    noise.start()
    for thread in workers:
        thread.start()
    for thread in workers:
        thread.join()
    stop.set()
    noise.join()
    stats = rc.stats()
    live_before_close = backend.live
    rc.close()
print(json.dumps({"errors": errors, "hits": stats.hits, "misses": stats.misses,
    "invalidations": stats.invalidations, "cached": stats.cached,
    "registrations": stats.registrations, "live_before_close": live_before_close,
    "live_after_close": backend.live, "pinned": stats.pinned_bytes}))
"""


def test_threads_register_deregister_and_release_concurrently() -> None:
    done = run_python(CHILD, timeout=240)
    assert done.returncode == 0, done.stderr
    result = json.loads(done.stdout.strip().splitlines()[-1])
    assert result["errors"] == []
    assert result["hits"] > 0 and result["misses"] > 0 and result["invalidations"] > 0
    # Nothing is held at the end: everything alive is in the LRU, and close releases it.
    assert result["cached"] == result["registrations"] == result["live_before_close"]
    assert result["live_after_close"] == 0
