"""grdma's native interval tree at 100 k registrations against ``intervaltree`` and ``ncls``.

All three hold the same 100 000 page-aligned ranges (1 to 64 pages, random
bases) and answer the same queries, in one process, rounds alternating in
ABBA order:

* insert: building the index one range at a time (``ncls`` has no insert:
  its time is a bulk build from arrays, reported for reference);
* lookup: "a registration covering [a, b)", the question a transport asks
  the cache per message.  pmca's side is the user-facing call, one per
  lookup: ``rc.find(address, size)`` on a grdma cache of a live session
  holding the same ranges (memory hooks installed, as in an MPI rank).
  ``rc.find`` first applies every release published before it; the judged
  row delivers them before each round, so it times the fast path (nothing
  pending).  A second row publishes one release (outside every cached
  range) before each lookup, so every ``rc.find`` drains in the timed path;
  the publish call alone is timed for reference.  The bare index call is
  shown too (``intervaltree``: ``at(a)`` filtered; ``ncls``:
  ``find_overlap`` filtered);
* invalidate: "every registration overlapping [a, b)" for ranges that hit
  about 1, 10, 100 and 1000 registrations: the cost should grow with the
  hits, not with the size of the index.

Goal: ``rc.find`` with no release pending at least 10x faster than
``intervaltree`` (ratio <= 0.1); the drained row is reported, not judged.
``intervaltree``, ``ncls`` (and numpy) are benchmark-only: this script
installs them into the running interpreter when they are missing.
"""

from __future__ import annotations

import ctypes
import gc
import importlib
import random
import subprocess
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path

import _common as common
import _goals as goals

common.use_working_tree()

N = 100_000
QUERIES = 20_000
PAGE = 4096
GOAL_LOOKUP_RATIO = 0.1


def ensure_baselines() -> None:
    missing = [name for name in ("intervaltree", "ncls") if _absent(name)]
    if missing:
        print(f"installing benchmark-only baselines: {', '.join(missing)}", flush=True)
        subprocess.run([sys.executable, "-m", "pip", "install", "--quiet", *missing], check=True)
        importlib.invalidate_caches()


def _absent(name: str) -> bool:
    try:
        importlib.import_module(name)
    except ImportError:
        return True
    return False


def itree_library() -> ctypes.CDLL:
    """The installed index library, or one built from the working tree's source."""
    from pmca.rcache.grdma import _tree

    path = _tree.library_path()
    if not path.exists():
        sources = [str(path.with_name(name)) for name in ("itree.c", "itree_blocks.c")]
        path = Path(tempfile.mkdtemp(prefix="pmca-bench-")) / _tree.LIBRARY_NAME
        subprocess.run(
            [
                "gcc",
                "-O2",
                "-std=gnu11",
                "-fPIC",
                "-shared",
                "-pthread",
                "-o",
                str(path),
                *sources,
            ],
            check=True,
        )
    return ctypes.CDLL(str(path))


def ranges(rng: random.Random) -> list[tuple[int, int]]:
    span = 1 << 36  # 64 GiB of address space
    result = []
    for _ in range(N):
        base = rng.randrange(0, span // PAGE) * PAGE
        result.append((base, base + rng.randint(1, 64) * PAGE))
    return result


def main() -> None:
    args = common.parser(__doc__.splitlines()[0]).parse_args()
    ensure_baselines()
    import numpy as np
    from intervaltree import IntervalTree as PyIntervalTree
    from ncls import NCLS

    import pmca
    from pmca import native
    from pmca.rcache import UnpinnedBackend
    from pmca.rcache.grdma import IntervalTree

    rounds = 3 if args.quick else 5
    rng = random.Random(42)
    data = ranges(rng)
    queries = []
    for _ in range(QUERIES // (10 if args.quick else 1)):
        base, bound = data[rng.randrange(N)]
        low = base + rng.randrange(0, (bound - base) // PAGE) * PAGE
        queries.append((low, min(bound, low + PAGE)))
    lib = itree_library()

    def build_pmca() -> IntervalTree:
        tree = IntervalTree(lib)
        for key, (base, bound) in enumerate(data):
            tree.insert(base, bound, key)
        return tree

    def build_python() -> PyIntervalTree:
        tree = PyIntervalTree()
        for key, (base, bound) in enumerate(data):
            tree.addi(base, bound, key)
        return tree

    starts = np.array([b for b, _ in data], dtype=np.int64)
    ends = np.array([e for _, e in data], dtype=np.int64)
    ids = np.arange(N, dtype=np.int64)

    def build_ncls() -> NCLS:
        return NCLS(starts, ends, ids)

    common.heading(f"insert {N} ranges, {rounds} rounds")
    built: dict[str, object] = {}

    def insert_side(name: str, build: object) -> object:
        def side() -> float:
            result: list[object] = []
            seconds = common.timed(lambda: result.append(build()))  # type: ignore[operator]
            old = built.get(name)
            if isinstance(old, IntervalTree):
                old.destroy()
            built[name] = result[0]
            return seconds

        return side

    insert = common.interleave(
        {
            "pmca": insert_side("pmca", build_pmca),
            "intervaltree": insert_side("intervaltree", build_python),
            "ncls (bulk build)": insert_side("ncls", build_ncls),
        },
        repeats=rounds,
    )
    for name, samples in insert.items():
        each = common.format_seconds(common.median(samples) / N)
        print(f"  {name:20s} {each}/range  raw ms {common.raw(samples)}")

    # The cache a transport would use, holding the same ranges (a range that
    # an earlier one covers reuses it, as grdma does).  The backend pins
    # nothing: these are address ranges, not memory.
    session = pmca.Session()
    session.__enter__()
    cache = pmca.rcache.create("grdma", UnpinnedBackend(), leave_pinned=True, cache_max_bytes=0)
    if not cache.coherent:
        sys.exit("bench_rcache: no memory hooks here, so no release events to drain")
    for base, bound in data:
        cache.deregister(cache.register(base, bound - base))
    requests = [(low, high - low) for low, high in queries]

    # Lookups allocate (ints, tuples): with ~10 million intervaltree objects
    # alive, a collection triggered there would be charged to whichever side
    # happened to run.  Nothing below creates cycles.
    gc.disable()
    pmca_tree: IntervalTree = built["pmca"]  # type: ignore[assignment]
    py_tree: PyIntervalTree = built["intervaltree"]  # type: ignore[assignment]
    ncls_tree: NCLS = built["ncls"]  # type: ignore[assignment]

    def lookup_pmca() -> None:
        find = cache.find
        for address, size in requests:
            find(address, size)

    hooks = native.backend()
    # Outside every cached range (which lie below 64 GiB): the drain has work
    # to do, the cache keeps its registrations.
    elsewhere = 1 << 40

    def lookup_pmca_pending() -> None:
        find, publish = cache.find, hooks.publish_synthetic
        for address, size in requests:
            publish(1, elsewhere, PAGE)
            find(address, size)

    def publish_alone() -> None:
        publish = hooks.publish_synthetic
        for _ in requests:
            publish(1, elsewhere, PAGE)

    def lookup_index() -> None:
        find = pmca_tree.find_covering
        for low, high in queries:
            find(low, high)

    def lookup_python() -> None:
        for low, high in queries:
            next((i for i in py_tree.at(low) if i.end >= high), None)

    def lookup_ncls() -> None:
        for low, high in queries:
            next(
                (k for s, e, k in ncls_tree.find_overlap(low, high) if s <= low and e >= high), None
            )

    # Same answers (a covering range exists for every query), then time.
    assert all(pmca_tree.find_covering(lo, hi) is not None for lo, hi in queries[:200])
    assert all(cache.find(address, size) is not None for address, size in requests[:200])

    def settled(lookups: Callable[[], None]) -> Callable[[], float]:
        """One timed round, after delivering the releases the previous round caused.

        Every side's garbage (the baselines free a lot) becomes release events
        for the session's listener thread; delivered here, outside any timing,
        they are not charged to whichever side runs when the listener wakes.
        """

        def side() -> float:
            pmca.memory.drain()
            return common.timed(lookups)

        return side

    common.heading(f"lookup: {len(queries)} covering queries, {rounds} rounds")
    lookup = common.interleave(
        {
            "pmca": settled(lookup_pmca),
            "pmca, a release pending at each lookup": settled(lookup_pmca_pending),
            "release publish alone": settled(publish_alone),
            "pmca index alone": settled(lookup_index),
            "intervaltree": settled(lookup_python),
            "ncls": settled(lookup_ncls),
        },
        repeats=rounds,
        warmup=1,
    )
    per = {name: common.median(s) / len(queries) for name, s in lookup.items()}
    for name, samples in lookup.items():
        print(
            f"  {name:20s} {common.format_seconds(per[name])}/lookup  raw ms {common.raw(samples)}"
        )

    common.heading("invalidate: cost per range against registrations hit")
    hits_cost = {}
    for target in (1, 10, 100, 1000):
        width = max(PAGE, (1 << 36) * target // N)
        windows = [rng.randrange(0, (1 << 36) - width) for _ in range(200)]
        found = [len(pmca_tree.overlapping(w, w + width)) for w in windows]
        seconds = common.median(
            [
                common.timed(
                    lambda w=windows, n=width: [pmca_tree.overlapping(x, x + n) for x in w]
                )
                for _ in range(rounds)
            ]
        )
        mean_hits = sum(found) / len(found)
        hits_cost[target] = (mean_hits, seconds / len(windows))
        print(f"  ~{mean_hits:8.1f} hits: {common.format_seconds(seconds / len(windows))}/query")

    report = common.Report("bench_rcache")
    # Paired: each round's pmca sample over the same round's baseline sample.
    judged = goals.ratio_goal(
        "rc.find, no release pending (fast path) / intervaltree",
        lookup["pmca"],
        lookup["intervaltree"],
        GOAL_LOOKUP_RATIO,
    )
    report.ratios["lookup pmca, no release pending / intervaltree"] = judged.value
    pending = goals.ratio_goal(
        "rc.find, a release pending at each lookup (drained in the timed path) / intervaltree",
        lookup["pmca, a release pending at each lookup"],
        lookup["intervaltree"],
        float("inf"),
    )
    report.ratios[pending.name] = pending.value
    report.ratios["release publish alone / intervaltree lookup"] = common.paired_ratio(
        lookup["release publish alone"], lookup["intervaltree"]
    )
    report.ratios["lookup pmca / ncls"] = common.paired_ratio(lookup["pmca"], lookup["ncls"])
    report.ratios["lookup pmca index alone / intervaltree"] = common.paired_ratio(
        lookup["pmca index alone"], lookup["intervaltree"]
    )
    report.ratios["insert pmca / intervaltree"] = common.paired_ratio(
        insert["pmca"], insert["intervaltree"]
    )
    report.ratios["insert pmca / ncls bulk build"] = common.paired_ratio(
        insert["pmca"], insert["ncls (bulk build)"]
    )
    report.goals.append(judged)
    report.figure(
        f"rcache: {len(queries)} covering lookups among {N} registrations",
        {side: {"lookup": samples} for side, samples in lookup.items()},
        unit="s",
        baseline="intervaltree",
    )
    report.figure(
        f"rcache: inserting {N} registrations",
        {side: {"insert": samples} for side, samples in insert.items()},
        unit="s",
        baseline="intervaltree",
    )
    small, large = hits_cost[1], hits_cost[1000]
    report.notes.append(
        f"invalidate: {small[0]:.0f} hits {common.format_seconds(small[1])}, "
        f"{large[0]:.0f} hits {common.format_seconds(large[1])} "
        f"({large[1] / max(large[0], 1) * 1e9:.0f} ns per hit at the high end)"
    )
    report.notes.append("ncls has no incremental insert: its insert figure is a bulk build")
    report.notes.append(
        "judged: rc.find(address, size), one call per lookup, every release delivered "
        "before the round (its fast path: the index says nothing is pending); the row with a "
        "release published before each lookup times the drain too (its publish call included, "
        "shown alone for reference); "
        f"cache: {pmca.rcache.describe_stats(cache.stats())}"
    )
    pmca_tree.destroy()
    session.__exit__(None, None, None)
    gc.enable()
    report.emit()


if __name__ == "__main__":
    main()
