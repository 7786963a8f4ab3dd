"""Cost of pmca's native memory hooks.

    python benchmarks/bench_hooks.py

Prints, in one run:
  * the time of one mmap+munmap cycle of 4 KiB with the hooks installed
    versus not installed, and their ratio (goal: <= 1.10x).  Both are
    measured in C (libpmca_probe.so's loop) so that Python and ctypes
    overhead does not dilute the ratio; hooked and unhooked batches are
    interleaved and repeated, and medians are reported.
  * how many events per second drain from the ring into Python, raw
    (HookBackend.drain) and through the dispatcher to one subscriber.
"""

from __future__ import annotations

import argparse
import ctypes
import statistics
import sys
import threading
import time
from collections.abc import Callable
from typing import cast

import pmca.native as native
from pmca._libc import PAGE
from pmca.native._abi import probe_library_path

BATCH = 2000  # cycles per timed batch: stays below the ring capacity

MapUnmapLoop = Callable[[int, int], int]  # (length, iterations) -> failures


def load_loop() -> MapUnmapLoop:
    probe = ctypes.CDLL(str(probe_library_path()))
    loop = probe.pmca_probe_map_unmap_loop
    loop.restype = ctypes.c_size_t
    loop.argtypes = [ctypes.c_size_t, ctypes.c_size_t]
    return cast(MapUnmapLoop, loop)


def timed_batch(loop: MapUnmapLoop) -> float:
    """Seconds per mmap+munmap cycle over one batch."""
    start = time.perf_counter_ns()
    failures = loop(PAGE, BATCH)
    elapsed = time.perf_counter_ns() - start
    if failures:
        raise RuntimeError(f"{failures} mmap/munmap cycles failed")
    return elapsed / BATCH / 1e9


def cycle_cost(hooks: native.HookBackend, loop: MapUnmapLoop, repeats: int) -> None:
    symbols = ("munmap", "mmap")
    plain: list[float] = []
    hooked: list[float] = []
    for _ in range(20):  # warm up page tables, caches and the CPU clock
        timed_batch(loop)
    for _ in range(repeats):
        plain.append(timed_batch(loop))
        sites = [hooks.install(symbol) for symbol in symbols]
        hooked.append(timed_batch(loop))
        for site in reversed(sites):
            hooks.restore(site)
        hooks.drain(hooks.capacity)  # every timed munmap really pushed an event
    ratios = [h / p for h, p in zip(hooked, plain, strict=True)]
    differences = [h - p for h, p in zip(hooked, plain, strict=True)]
    plain_median = statistics.median(plain) * 1e9
    hooked_median = statistics.median(hooked) * 1e9
    ratio = statistics.median(ratios)
    verdict = "ok" if ratio <= 1.10 else "ABOVE GOAL"
    print(f"mmap+munmap 4 KiB, {repeats} interleaved batches of {BATCH} cycles (medians):")
    print(f"  hooks not installed : {plain_median:8.1f} ns/cycle")
    print(f"  hooks installed     : {hooked_median:8.1f} ns/cycle")
    print(f"  ratio               : {ratio:8.3f}x   (goal <= 1.10x: {verdict})")
    print(f"  hook cost           : {statistics.median(differences) * 1e9:8.1f} ns/cycle (paired)")


def drain_throughput(hooks: native.HookBackend, loop: MapUnmapLoop, repeats: int) -> None:
    count = hooks.capacity
    delivered = [0]
    all_delivered = threading.Event()

    def subscriber(address: int, length: int, kind: str, from_alloc: bool) -> None:
        delivered[0] += 1
        if delivered[0] >= count:
            all_delivered.set()

    raw: list[float] = []
    listener: list[float] = []
    dispatch = native.dispatcher()
    site = hooks.install("munmap")
    try:
        for _ in range(repeats):
            hooks.drain(count)
            loop(PAGE, count)  # a full ring
            start = time.perf_counter()
            drained = hooks.drain(count)
            raw.append(len(drained.events) / (time.perf_counter() - start))

            # End to end: the listener thread starts, drains and calls a
            # subscriber once per event; nobody else drains, so no duplicates.
            hooks.drain(count)
            loop(PAGE, count)
            delivered[0] = 0
            all_delivered.clear()
            start = time.perf_counter()
            subscription = dispatch.subscribe(subscriber)
            try:
                if not all_delivered.wait(60):
                    raise RuntimeError("the listener did not deliver the events")
                listener.append(count / (time.perf_counter() - start))
            finally:
                subscription.unregister()
    finally:
        hooks.restore(site)
    print(f"drain throughput, {count} events per batch (medians of {repeats}):")
    print(f"  HookBackend.drain (to ReleaseEvent) : {statistics.median(raw):10,.0f} events/s")
    print(f"  listener -> 1 subscriber            : {statistics.median(listener):10,.0f} events/s")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=41, help="interleaved batches")
    args = parser.parse_args(argv)
    if not native.available():
        print(f"native hooks unavailable: {native.unavailable_reason()}", file=sys.stderr)
        return 1
    if not probe_library_path().exists():
        print(f"{probe_library_path().name} was not built", file=sys.stderr)
        return 1
    hooks = native.backend()
    loop = load_loop()
    print(f"membarrier: {hooks.membarrier_mode}; ring capacity {hooks.capacity} events")
    cycle_cost(hooks, loop, args.repeats)
    drain_throughput(hooks, loop, max(3, args.repeats // 8))
    return 0


if __name__ == "__main__":
    sys.exit(main())
