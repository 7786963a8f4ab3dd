"""Cost of pmca's native memory hooks and of delivering their events to Python.

    python benchmarks/bench_hooks.py [--quick]

Three parts, each in a fresh interpreter:

* ``cost``: release-heavy loops run in C (libpmca_probe.so) with the hooks
  installed and one subscriber, against the same loop with no hooks at all;
  CPU time (every thread of the process, the listener included) and wall
  time, rounds alternating ABBA, one ratio per pair, median reported.  The
  measured side includes the final ``drain()``: every event was delivered
  when its clock stops.  Once with a per-event callback, once with a batched
  one.
* ``throughput``: events per second from the ring to one Python callback,
  per-event and batched, through ``dispatcher.drain()``.
* ``storm``: 8 threads (C pthreads, then Python threads) mmap+munmap as fast
  as they can for 10 s (2 s with ``--quick``) with one per-event subscriber
  on the process-wide dispatcher (its listener thread delivers); every
  munmap of the threads' known length must be delivered (count and
  address sum compared), with no overflow at the default ring size.
"""

from __future__ import annotations

import ctypes
import mmap
import threading
import time
from collections.abc import Callable
from typing import Any

import _common as common
import _goals as goals

MIB = 1 << 20
PAGE = mmap.PAGESIZE
STORM_THREADS = 8
#: The storm threads release mappings of these lengths, which nothing else in
#: the process uses, so their events can be told from any other traffic.
STORM_LENGTH_C = 13 * PAGE
STORM_LENGTH_PY = 11 * PAGE


def _probe() -> ctypes.CDLL:
    from pmca.native._abi import probe_library_path

    probe = ctypes.CDLL(str(probe_library_path()))
    probe.pmca_probe_map_unmap_loop.restype = ctypes.c_size_t
    probe.pmca_probe_map_unmap_loop.argtypes = [ctypes.c_size_t, ctypes.c_size_t]
    probe.pmca_probe_malloc_free_loop.restype = ctypes.c_size_t
    probe.pmca_probe_malloc_free_loop.argtypes = [ctypes.c_size_t] * 3
    probe.pmca_probe_release_threads.restype = ctypes.c_int
    probe.pmca_probe_release_threads.argtypes = [
        ctypes.c_int,
        ctypes.c_size_t,
        ctypes.c_uint,
        ctypes.POINTER(ctypes.c_uint64),
    ]
    return probe


class _Counter:
    """A per-event subscriber that counts (what a cache's callback costs at the least)."""

    def __init__(self) -> None:
        self.events = 0

    def __call__(self, address: int, length: int, kind: str, from_alloc: bool) -> None:
        self.events += 1


class _BatchCounter:
    def __init__(self) -> None:
        self.events = 0

    def __call__(self, batch: Any) -> None:
        self.events += len(batch)


# -- cost -------------------------------------------------------------------------


def _loops(probe: ctypes.CDLL, quick: bool) -> dict[str, Callable[[], object]]:
    scale = 4 if quick else 1

    def check(failures: int) -> None:
        if failures:
            raise RuntimeError(f"{failures} iterations failed")

    def python_mmap() -> None:
        for _ in range(4000 // scale):
            mmap.mmap(-1, MIB).close()

    return {
        "mmap+munmap 4 KiB (C)": lambda: check(
            probe.pmca_probe_map_unmap_loop(4096, 40000 // scale)
        ),
        "mmap+munmap 1 MiB (C)": lambda: check(
            probe.pmca_probe_map_unmap_loop(MIB, 40000 // scale)
        ),
        "malloc/free 1-64 MiB (C)": lambda: check(
            probe.pmca_probe_malloc_free_loop(MIB, 64 * MIB, 4000 // scale)
        ),
        "mmap.mmap 1 MiB (Python)": python_mmap,
    }


def _cost_child(args: dict[str, Any]) -> None:
    import pmca.native as native

    hooks = native.backend()
    probe = _probe()
    rounds = int(args["rounds"])
    batch = bool(args["batch"])
    results: dict[str, dict[str, list[float]]] = {}
    for name, loop in _loops(probe, bool(args["quick"])).items():
        for _ in range(2):
            loop()  # warm up page tables and the allocator

        def plain(loop: Callable[[], object] = loop) -> tuple[float, float]:
            wall, cpu = time.perf_counter(), time.process_time()
            loop()
            return time.perf_counter() - wall, time.process_time() - cpu

        def hooked(loop: Callable[[], object] = loop, name: str = name) -> tuple[float, float]:
            sites = [hooks.install(symbol) for symbol in hooks.symbols]
            counter: Any = _BatchCounter() if batch else _Counter()
            subscription = native.dispatcher().subscribe(counter, batch=batch)
            try:
                wall, cpu = time.perf_counter(), time.process_time()
                loop()
                native.dispatcher().drain()
                elapsed = time.perf_counter() - wall, time.process_time() - cpu
            finally:
                subscription.unregister()
                for site in reversed(sites):
                    hooks.restore(site)
            if counter.events == 0:
                raise RuntimeError(f"{name}: the subscriber received nothing")
            return elapsed

        samples: dict[str, list[float]] = {"plain wall": [], "plain cpu": []}
        samples |= {"hooked wall": [], "hooked cpu": []}
        for round_ in range(rounds):
            order = (("plain", plain), ("hooked", hooked))
            for side, run in order if round_ % 2 == 0 else order[::-1]:
                wall, cpu = run()
                samples[f"{side} wall"].append(wall)
                samples[f"{side} cpu"].append(cpu)
        results[name] = samples
    common.child_reply({"results": results})


def cost(report: common.Report, quick: bool) -> None:
    rounds = 5 if quick else 15
    for batch in (False, True):
        kind = "batched subscriber" if batch else "per-event subscriber"
        common.heading(f"cost with one {kind} ({rounds} paired rounds)")
        reply = common.run_child(
            common.BENCH_DIR / "bench_hooks.py",
            "cost",
            {"rounds": rounds, "batch": batch, "quick": quick},
            common.child_env(),
        )
        for clock in ("cpu", "wall"):
            report.figure(
                f"hook overhead, {kind}, {clock} time",
                {
                    side: {
                        name: samples[f"{side} {clock}"]
                        for name, samples in reply["results"].items()
                    }
                    for side in ("hooked", "plain")
                },
                unit="s",
                baseline="plain",
            )
        for name, samples in reply["results"].items():
            for clock in ("cpu", "wall"):
                hooked, plain = samples[f"hooked {clock}"], samples[f"plain {clock}"]
                ratios = common.paired_ratios(hooked, plain)
                ratio = common.paired_ratio(hooked, plain)
                print(
                    f"  {name:26} {clock:4}  plain {common.format_seconds(common.median(plain)):>9}"
                    f"  hooked {common.format_seconds(common.median(hooked)):>9}"
                    f"  ratio {ratio:5.3f}  pairs {', '.join(f'{r:.2f}' for r in ratios)}"
                )
                key = f"{name}, {kind}, {clock}"
                report.ratios[key] = ratio
                if name != "mmap+munmap 1 MiB (C)" and name != "mmap.mmap 1 MiB (Python)":
                    report.goals.append(
                        goals.ratio_goal(f"{key} (hooked/plain)", hooked, plain, 1.10)
                    )


# -- throughput ----------------------------------------------------------------------


def _throughput_child(args: dict[str, Any]) -> None:
    import pmca.native as native

    hooks = native.backend()
    events = min(200_000, hooks.capacity - 1000)
    # Rates per second of the draining thread's CPU time (the delivery runs on
    # that one thread): on a machine shared with other work, wall time
    # measures the neighbours as much as pmca.  Wall-clock rates are kept too.
    rates: dict[str, list[float]] = {"per-event": [], "batched": []}
    wall_rates: dict[str, list[float]] = {"per-event": [], "batched": []}
    for _ in range(int(args["rounds"])):
        for side, batch in (("per-event", False), ("batched", True)):
            # A dispatcher without a listener: the timed drain() does all the work.
            dispatch = native.ReleaseDispatcher(listen=False)
            counter: Any = _BatchCounter() if batch else _Counter()
            subscription = dispatch.subscribe(counter, batch=batch)
            published = hooks.publish_synthetic(events)
            start, cpu = time.perf_counter(), time.thread_time()
            dispatch.drain()
            elapsed, cpu = time.perf_counter() - start, time.thread_time() - cpu
            subscription.unregister()
            if counter.events < published:
                raise RuntimeError(f"{side}: {counter.events} of {published} delivered")
            rates[side].append(counter.events / max(cpu, 1e-9))
            wall_rates[side].append(counter.events / elapsed)
    common.child_reply({"rates": rates, "wall_rates": wall_rates, "events": events})


def throughput(report: common.Report, quick: bool) -> None:
    rounds = 5 if quick else 21
    common.heading(f"delivery throughput, ring -> one Python callback ({rounds} rounds)")
    reply = common.run_child(
        common.BENCH_DIR / "bench_hooks.py", "throughput", {"rounds": rounds}, common.child_env()
    )
    print(f"  ({reply['events']} events per drain; M events per CPU second, then per wall second)")
    for side, goal in (("per-event", 5e6), ("batched", 30e6)):
        rates, wall = reply["rates"][side], reply["wall_rates"][side]
        rate = common.median(rates)
        print(
            f"  {side:9}  {rate / 1e6:7.2f} M/s CPU  [{', '.join(f'{r / 1e6:.1f}' for r in rates)}]"
            f"\n  {'':9}  {common.median(wall) / 1e6:7.2f} M/s wall"
            f" [{', '.join(f'{r / 1e6:.1f}' for r in wall)}]"
        )
        report.goals.append(goals.rate_goal(f"{side} delivery, ns per event", rates, goal))


# -- storm ---------------------------------------------------------------------------


class _StormWatcher:
    """Counts the storm's munmaps (by their length) and sums their addresses."""

    def __init__(self, length: int) -> None:
        self.length = length
        self.count = 0
        self.address_sum = 0
        self.overflows = 0

    def __call__(self, address: int, length: int, kind: str, from_alloc: bool) -> None:
        if length == self.length and kind == "munmap":
            self.count += 1
            self.address_sum += address
        elif kind == "overflow":
            self.overflows += 1


def _python_storm(seconds: float, length: int) -> tuple[int, int]:
    from pmca._libc import libc

    c = libc()
    stop = threading.Event()
    totals: list[tuple[int, int]] = []

    def work() -> None:
        count = total = 0
        while not stop.is_set():
            address = c.map_anonymous(length)
            c.munmap(address, length)
            count += 1
            total += address
        totals.append((count, total))

    threads = [threading.Thread(target=work) for _ in range(STORM_THREADS)]
    for thread in threads:
        thread.start()
    time.sleep(seconds)
    stop.set()
    for thread in threads:
        thread.join()
    return sum(c for c, _ in totals), sum(t for _, t in totals)


def _storm_child(args: dict[str, Any]) -> None:
    import pmca.native as native

    hooks = native.backend()
    probe = _probe()
    seconds = float(args["seconds"])
    sites = [hooks.install(symbol) for symbol in hooks.symbols]
    outcome: dict[str, Any] = {}
    try:
        for variant, length in (
            ("C pthreads", STORM_LENGTH_C),
            ("Python threads", STORM_LENGTH_PY),
        ):
            watcher = _StormWatcher(length)
            before = native.stats()
            subscription = native.dispatcher().subscribe(watcher)
            start = time.perf_counter()
            if variant == "C pthreads":
                results = (ctypes.c_uint64 * 3)()
                if probe.pmca_probe_release_threads(
                    STORM_THREADS, length, int(seconds * 1000), results
                ):
                    raise RuntimeError("cannot start the storm threads")
                released, address_sum = results[0], results[1]
            else:
                released, address_sum = _python_storm(seconds, length)
            native.dispatcher().drain()
            elapsed = time.perf_counter() - start
            subscription.unregister()
            after = native.stats()
            outcome[variant] = {
                "released": released,
                "delivered": watcher.count,
                "sums_match": watcher.address_sum % 2**64 == address_sum % 2**64,
                "overflow_notices": watcher.overflows,
                "dropped": after.dropped - before.dropped,
                "wakeups": after.wakeups - before.wakeups,
                "threshold_wakeups": after.threshold_wakeups - before.threshold_wakeups,
                "lagged": after.lagged - before.lagged,
                "seconds": elapsed,
                "capacity": after.capacity,
            }
    finally:
        for site in reversed(sites):
            hooks.restore(site)
    common.child_reply(outcome)


def storm(report: common.Report, quick: bool) -> None:
    seconds = 2.0 if quick else 10.0
    common.heading(f"{STORM_THREADS} threads releasing memory for {seconds:g} s, one subscriber")
    reply = common.run_child(
        common.BENCH_DIR / "bench_hooks.py", "storm", {"seconds": seconds}, common.child_env()
    )
    for variant, found in reply.items():
        print(
            f"  {variant:15} {found['released']:>10,} munmaps, {found['delivered']:>10,} delivered"
            f" (address sums {'match' if found['sums_match'] else 'DIFFER'}),"
            f" dropped {found['dropped']}, overflow notices {found['overflow_notices']},"
            f" wake-ups {found['wakeups']} ({found['threshold_wakeups']} by fill),"
            f" ring {found['capacity']} slots"
        )
        report.goals.extend(goals.storm_goals(variant, found))
        if not found["sums_match"]:
            report.notes.append(f"storm, {variant}: delivered addresses differ from released")


def main() -> int:
    args = common.parser(__doc__.splitlines()[0]).parse_args()
    roles = {"cost": _cost_child, "throughput": _throughput_child, "storm": _storm_child}
    if common.serve_child(args, roles):
        return 0
    common.use_working_tree()
    import pmca.native as native

    print(f"pmca from {common.pmca_location()}")
    if not native.available():
        print(f"native hooks unavailable: {native.unavailable_reason()}")
        return 1
    report = common.Report("bench_hooks")
    throughput(report, args.quick)
    cost(report, args.quick)
    storm(report, args.quick)
    report.emit()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
