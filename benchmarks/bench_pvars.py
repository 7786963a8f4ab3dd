"""What a pvar session reading every millisecond costs the paths it watches.

Both sides run with every pvar registered (they always are); in each
subject round a thread of the measured process opens a pvar session with
one handle on every pvar ``s.pvars()`` lists (a bound pvar once per object:
each btl pvar once per peer rank), starts the handles that are not
continuous, reads every handle once a millisecond (a tool polling hard),
and frees the session at the round's end; the baseline rounds have no
session and no thread. Rounds alternate in ABBA order in the same
processes; the figure is the median of per-round ratios. Each part prints
how many handles were read, how many sweeps the reader really made per
second and the processor time one sweep took.

- **hooks**: ``mmap`` + ``munmap`` of 64 KiB with one release subscriber,
  drained at the end of each round.
- **btl 8 B ping-pong**: ``s.p2p`` send/recv of 8 bytes between this
  process and a forked one over ``btl = self,tcp`` (a socket pair world);
  the reader runs in this process, whose round trip is timed.

Goals: subject/baseline <= 1.02 for both.

``--period SECONDS`` changes how often the reader sweeps (default 0.001):
a much shorter period is a run that shows the goals can be missed.
"""

from __future__ import annotations

import mmap
import os
import socket
import threading
import time
from collections.abc import Callable
from typing import Any

import _common as common
import _goals as goals

GOAL = 1.02
#: Seconds between two sweeps of the reader (``--period``).
PERIOD = [1e-3]


class Reader:
    """A thread reading every pvar through one pvar session, every :data:`PERIOD`."""

    def __init__(self, session: Any) -> None:
        from pmca.mca import Binding, PVarFlag

        self.session = ps = session.pvar_session()
        self.handles = []
        for pvar in session.pvars():
            objects = [None]
            if pvar.binding is not Binding.NONE:
                from pmca.mca._pvars import REGISTRY

                objects = REGISTRY.objects(pvar.name)
            for obj in objects:
                handle = ps.handle(pvar.name, obj)
                if not pvar.flags & PVarFlag.CONTINUOUS:
                    handle.start()
                self.handles.append(handle)
        self.sweeps = 0
        #: Processor seconds the reader's thread spent in its sweeps.
        self.sweep_seconds = 0.0
        self.elapsed = 0.0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        period, handles = PERIOD[0], self.handles
        clock = time.thread_time
        while not self._stop.wait(period):
            began = clock()
            for handle in handles:
                handle.read()
            self.sweep_seconds += clock() - began
            self.sweeps += 1

    def __enter__(self) -> Reader:
        self._began = time.perf_counter()
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()
        self.elapsed = time.perf_counter() - self._began
        self.session.free()  # stops what it started (the matching timer)


def _rounds(
    session: Any, work: Callable[[], float], repeats: int
) -> tuple[dict[str, list[float]], dict[str, float]]:
    seen = {"sweeps": 0.0, "sweep_seconds": 0.0, "seconds": 0.0, "handles": 0.0}

    def with_reader() -> float:
        with Reader(session) as reader:
            elapsed = work()
        seen["sweeps"] += reader.sweeps
        seen["sweep_seconds"] += reader.sweep_seconds
        seen["seconds"] += reader.elapsed
        seen["handles"] = len(reader.handles)
        return elapsed

    samples = common.interleave(
        {"baseline": work, "subject": with_reader}, repeats=repeats, warmup=1
    )
    return samples, seen


def hooks(report: common.Report, quick: bool) -> None:
    import pmca

    common.heading("hooks: mmap + munmap of 64 KiB, one subscriber")
    count = 2000 if quick else 20000
    with pmca.Session(frameworks=["memory"]) as s:
        handle = pmca.memory.register_release(lambda *_: None)

        def work() -> float:
            start = time.perf_counter()
            for _ in range(count):
                mmap.mmap(-1, 1 << 16).close()
            pmca.memory.drain()
            return time.perf_counter() - start

        samples, seen = _rounds(s, work, 5 if quick else 15)
        handle.unregister()
    _judge(report, "hooks", samples, seen)


def _echo(fd: int) -> None:
    import pmca
    from pmca.world import PairWorld

    world = PairWorld(socket.socket(fileno=fd), 1)
    with pmca.Session(mca={"btl": "self,tcp"}, frameworks=["btl"], world=world) as s:
        buffer = bytearray(8)
        while True:
            s.p2p.recv(0, 1, buffer)
            if buffer == b"stop....":
                break
            s.p2p.send(0, 1, buffer)


def pingpong(report: common.Report, quick: bool) -> None:
    import pmca
    from pmca.world import PairWorld

    common.heading("btl 8 B ping-pong over tcp (this process and a forked one)")
    mine, theirs = socket.socketpair()
    pid = os.fork()
    if pid == 0:
        mine.close()
        try:
            _echo(theirs.detach())
        finally:
            os._exit(0)
    theirs.close()
    count = 500 if quick else 5000
    world = PairWorld(mine, 0)
    with pmca.Session(mca={"btl": "self,tcp"}, frameworks=["btl"], world=world) as s:
        message, buffer = b"8 bytes!", bytearray(8)

        def work() -> float:
            start = time.perf_counter()
            for _ in range(count):
                s.p2p.send(1, 1, message)
                s.p2p.recv(1, 1, buffer)
            return time.perf_counter() - start

        samples, seen = _rounds(s, work, 5 if quick else 15)
        s.p2p.send(1, 1, b"stop....")
    os.waitpid(pid, 0)
    _judge(report, "btl 8 B ping-pong", samples, seen)


def _judge(
    report: common.Report, name: str, samples: dict[str, list[float]], seen: dict[str, float]
) -> None:
    subject, baseline = samples["subject"], samples["baseline"]
    print(f"  baseline raw ms {common.raw(baseline)}")
    print(f"  subject  raw ms {common.raw(subject)}")
    sweeps = max(seen["sweeps"], 1)
    print(
        f"  reader: {seen['handles']:.0f} handles (every registered pvar, bound ones per object), "
        f"{seen['sweeps']:.0f} sweeps in {seen['seconds']:.2f} s of subject rounds "
        f"({seen['sweeps'] / max(seen['seconds'], 1e-9):.0f}/s, asked every {PERIOD[0]:g} s), "
        f"{seen['sweep_seconds'] / sweeps * 1e6:.1f} us of CPU per sweep"
    )
    every = f"every {PERIOD[0] * 1e3:g} ms"
    report.ratios[f"{name}: with a pvar session reading every pvar {every}"] = common.paired_ratio(
        subject, baseline
    )
    report.goals.append(
        goals.ratio_goal(
            f"{name}, pvar session reading every pvar {every} / none", subject, baseline, GOAL
        )
    )


def main() -> int:
    options = common.parser(__doc__.splitlines()[0])
    options.add_argument("--period", type=float, default=1e-3, help="seconds between sweeps")
    args = options.parse_args()
    PERIOD[0] = args.period
    common.use_working_tree()
    import pmca.native as native

    print(f"pmca from {common.pmca_location()}")
    report = common.Report("bench_pvars")
    if native.available():
        hooks(report, args.quick)
    else:
        report.notes.append(f"hooks skipped: {native.unavailable_reason()}")
    pingpong(report, args.quick)
    report.emit()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
