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
import time

import pmca.native as native
from pmca.native._abi import probe_library_path
from pmca.native._libc import PAGE

BATCH = 2000  # cycles per timed batch: stays below the ring capacity


def load_loop() -> ctypes._CFuncPtr:
    probe = ctypes.CDLL(str(probe_library_path()))
    loop = probe.pmca_probe_map_unmap_loop
    loop.restype = ctypes.c_size_t
    loop.argtypes = [ctypes.c_size_t, ctypes.c_size_t]
    return loop


def timed_batch(loop: ctypes._CFuncPtr) -> float:
    """Seconds per mmap+munmap cycle over one batch."""
    start = time.perf_counter_ns()
    failures = loop(PAGE, BATCH)
    elapsed = time.perf_counter_ns() - start
    if failures:
        raise RuntimeError(f"{failures} mmap/munmap cycles failed")
    return elapsed / BATCH / 1e9


def cycle_cost(hooks: native.HookBackend, loop: ctypes._CFuncPtr, repeats: int) -> None:
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
    plain_median = statistics.median(plain) * 1e9
    hooked_median = statistics.median(hooked) * 1e9
    ratio = statistics.median(ratios)
    verdict = "ok" if ratio <= 1.10 else "ABOVE GOAL"
    print(f"mmap+munmap 4 KiB, {repeats} interleaved batches of {BATCH} cycles (medians):")
    print(f"  hooks not installed : {plain_median:8.1f} ns/cycle")
    print(f"  hooks installed     : {hooked_median:8.1f} ns/cycle")
    print(f"  ratio               : {ratio:8.3f}x   (goal <= 1.10x: {verdict})")
    print(f"  hook cost           : {hooked_median - plain_median:8.1f} ns/cycle")


def drain_throughput(hooks: native.HookBackend, loop: ctypes._CFuncPtr, repeats: int) -> None:
    delivered_to_subscriber = [0]

    def subscriber(address: int, length: int, kind: str, from_alloc: bool) -> None:
        delivered_to_subscriber[0] += 1

    count = hooks.capacity
    raw: list[float] = []
    dispatched: list[float] = []
    dispatch = native.dispatcher()
    site = hooks.install("munmap")
    try:
        for _ in range(repeats):
            hooks.drain(count)
            loop(PAGE, count)
            start = time.perf_counter()
            drained = hooks.drain(count)
            raw.append(len(drained.events) / (time.perf_counter() - start))

            subscription = dispatch.subscribe(subscriber)
            try:
                dispatch.drain()
                loop(PAGE, count)
                start = time.perf_counter()
                pulled = dispatch.drain()
                dispatched.append(pulled / (time.perf_counter() - start))
            finally:
                subscription.unregister()
    finally:
        hooks.restore(site)
    print(f"drain throughput, {count} events per drain (medians of {repeats}):")
    print(f"  HookBackend.drain             : {statistics.median(raw):12,.0f} events/s")
    print(f"  dispatcher -> 1 subscriber    : {statistics.median(dispatched):12,.0f} events/s")


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
