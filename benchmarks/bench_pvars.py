"""What a pvar session reading every millisecond costs the paths it watches.

Every side runs with every pvar registered (they always are). A sampler
opens a pvar session with one handle on every pvar ``s.pvars()`` lists (a
bound pvar once per object: each btl pvar once per peer rank), starts the
handles that are not continuous, sweeps them with ``read_all()`` once a
millisecond (a tool polling hard), and frees the session at the round's
end. Four sides alternate in ABBA order in the same processes:

- **none**: no session, no sampler (the baseline);
- **in the timed thread**: the timed loop itself sweeps the session every
  so many iterations, as many as take a millisecond in a warm-up round (a
  tool that samples from its own calls into the library);
- **a thread of its own**: a thread of the timed process sleeps a
  millisecond and sweeps, again and again (a sampling thread);
- **a thread that reads nothing**: the same thread without a session, to
  show what waking every millisecond costs by itself.

Judged: the timed-thread sampler against none, and the sampling thread
against the thread that reads nothing (what the reading adds to a sampler),
each <= 1.02. The sampling thread against none is reported, not judged: on
two cores a process that only sleeps a millisecond at a time already slows
the ping-pong by a few per cent. Each part prints how many handles a sweep
reads, how many sweeps per second each sampler made and the time one sweep
took.

- **hooks**: ``mmap`` + ``munmap`` of 64 KiB with one release subscriber,
  drained at the end of each round.
- **btl 8 B ping-pong**: ``s.p2p`` send/recv of 8 bytes between this
  process and a forked one over ``btl = self,tcp`` (a socket pair world);
  the samplers run in this process, whose round trip is timed.

``--period SECONDS`` changes how often the samplers sweep (default 0.001):
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
#: Seconds between two sweeps (``--period``).
PERIOD = [1e-3]
#: Rounds of each side: a round is short, and the goals are 2 per cent.
ROUNDS = 41

#: A timed loop: ``work(sample, every)`` calls ``sample()`` every ``every``
#: iterations when given one, and returns the seconds it took.
Work = Callable[["Callable[[], None] | None", int], float]


class Sweeper:
    """A pvar session with a handle on every pvar, swept by ``read_all``."""

    def __init__(self, session: Any) -> None:
        from pmca.mca import Binding, PVarFlag

        self.session = ps = session.pvar_session()
        handles = 0
        for pvar in session.pvars():
            objects = [None]
            if pvar.binding is not Binding.NONE:
                from pmca.mca._pvars import REGISTRY

                objects = REGISTRY.objects(pvar.name)
            for obj in objects:
                handle = ps.handle(pvar.name, obj)
                if not pvar.flags & PVarFlag.CONTINUOUS:
                    handle.start()
                handles += 1
        self.handles = handles
        self.sweeps = 0
        #: Seconds the sweeps took (wall clock: the sweeping thread runs them).
        self.seconds = 0.0

    def __call__(self) -> None:
        clock = time.perf_counter
        began = clock()
        self.session.read_all()
        self.seconds += clock() - began
        self.sweeps += 1

    def free(self) -> None:
        self.session.free()  # stops what it started (the matching timer)


class SamplingThread:
    """A thread sleeping :data:`PERIOD` and calling ``sample`` (if any), until stopped."""

    def __init__(self, sample: Callable[[], None] | None) -> None:
        self.sample = sample
        self.wakes = 0
        self._stop = False
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        period, sample, sleep = PERIOD[0], self.sample, time.sleep
        while not self._stop:
            sleep(period)
            if sample is not None:
                sample()
            self.wakes += 1

    def __enter__(self) -> SamplingThread:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop = True
        self._thread.join()


class Seen:
    """What the samplers of one part did, over its rounds."""

    def __init__(self) -> None:
        self.handles = 0
        self.sweeps = {"in the timed thread": 0, "a thread of its own": 0}
        self.sweep_seconds = {"in the timed thread": 0.0, "a thread of its own": 0.0}
        self.seconds = {"in the timed thread": 0.0, "a thread of its own": 0.0}
        self.idle_wakes = 0


def _rounds(
    session: Any, work: Work, iterations: int, repeats: int
) -> tuple[dict[str, list[float]], Seen, int]:
    seen = Seen()
    work(None, 1)  # warm
    # The timed-thread sampler sweeps every so many iterations: one period's
    # worth, from the median of three rounds.
    per_round = sorted(work(None, 1) for _ in range(3))[1]
    every = max(1, round(PERIOD[0] * iterations / per_round))

    def none() -> float:
        return work(None, 1)

    def sampled(where: str, run: Callable[[Sweeper], float]) -> float:
        sweeper = Sweeper(session)
        try:
            elapsed = run(sweeper)
        finally:
            sweeper.free()
        seen.handles = sweeper.handles
        seen.sweeps[where] += sweeper.sweeps
        seen.sweep_seconds[where] += sweeper.seconds
        seen.seconds[where] += elapsed
        return elapsed

    def inline() -> float:
        return sampled("in the timed thread", lambda sweeper: work(sweeper, every))

    def own_thread() -> float:
        def run(sweeper: Sweeper) -> float:
            with SamplingThread(sweeper):
                return work(None, 1)

        return sampled("a thread of its own", run)

    def idle_thread() -> float:
        with SamplingThread(None) as idle:
            elapsed = work(None, 1)
        seen.idle_wakes += idle.wakes
        return elapsed

    samples = common.interleave(
        {"none": none, "inline": inline, "thread": own_thread, "idle": idle_thread},
        repeats=repeats,
        warmup=1,
    )
    return samples, seen, every


def hooks(report: common.Report, quick: bool) -> None:
    import pmca

    common.heading("hooks: mmap + munmap of 64 KiB, one subscriber")
    count = 2000 if quick else 20000
    with pmca.Session(frameworks=["memory"]) as s:
        handle = pmca.memory.register_release(lambda *_: None)

        def work(sample: Callable[[], None] | None, every: int) -> float:
            start = time.perf_counter()
            for i in range(count):
                mmap.mmap(-1, 1 << 16).close()
                if sample is not None and i % every == 0:
                    sample()
            pmca.memory.drain()
            return time.perf_counter() - start

        samples, seen, every = _rounds(s, work, count, 5 if quick else ROUNDS)
        handle.unregister()
    _judge(report, "hooks", samples, seen, every)


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

        def work(sample: Callable[[], None] | None, every: int) -> float:
            send, recv = s.p2p.send, s.p2p.recv
            start = time.perf_counter()
            for i in range(count):
                send(1, 1, message)
                recv(1, 1, buffer)
                if sample is not None and i % every == 0:
                    sample()
            return time.perf_counter() - start

        samples, seen, every = _rounds(s, work, count, 5 if quick else ROUNDS)
        s.p2p.send(1, 1, b"stop....")
    os.waitpid(pid, 0)
    _judge(report, "btl 8 B ping-pong", samples, seen, every)


def _judge(
    report: common.Report,
    name: str,
    samples: dict[str, list[float]],
    seen: Seen,
    every: int,
) -> None:
    for side, label in (
        ("none", "none"),
        ("inline", "in the timed thread"),
        ("thread", "a thread of its own"),
        ("idle", "a thread that reads nothing"),
    ):
        print(f"  {label:28} raw ms {common.raw(samples[side])}")
    print(f"  a sweep reads {seen.handles} handles (every pvar, bound ones per object)")
    for where, how in (
        ("in the timed thread", f"every {every} iterations"),
        ("a thread of its own", f"asked every {PERIOD[0]:g} s"),
    ):
        sweeps = max(seen.sweeps[where], 1)
        print(
            f"  {where}: {seen.sweeps[where]} sweeps "
            f"({seen.sweeps[where] / max(seen.seconds[where], 1e-9):.0f}/s, {how}), "
            f"{seen.sweep_seconds[where] / sweeps * 1e6:.1f} us per sweep"
        )
    every_text = f"every {PERIOD[0] * 1e3:g} ms"
    judged = (
        ("inline", "none", f"a pvar session swept {every_text} in the timed thread / none"),
        (
            "thread",
            "idle",
            f"a thread sweeping a pvar session {every_text} / a thread waking as often "
            "reading nothing",
        ),
    )
    for subject, baseline, what in judged:
        report.ratios[f"{name}: {what}"] = common.paired_ratio(samples[subject], samples[baseline])
        report.goals.append(
            goals.ratio_goal(f"{name}, {what}", samples[subject], samples[baseline], GOAL)
        )
    for subject, what in (
        ("thread", f"a thread sweeping a pvar session {every_text} / none"),
        ("idle", f"a thread waking {every_text} reading nothing / none"),
    ):
        report.ratios[f"{name}: {what}"] = common.paired_ratio(samples[subject], samples["none"])


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
