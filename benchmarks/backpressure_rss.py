"""A slow receiver over btl/tcp for a minute: both ranks' memory stays flat.

Rank 0 sends 1 MiB messages with blocking ``send`` as fast as it may; rank 1
receives one, then computes for 20 ms polling ``progress()`` every
millisecond (an ``MPI_Test`` loop), so it is about twenty times slower than
its sender, and whatever it reads while computing is unexpected. Every second
each rank samples its resident memory. btl/tcp stops reading once rank 1
holds more than ``btl_tcp_recv_queue_limit`` of rank 0's messages, so rank 1
stays within that bound and rank 0 is held back by its own send queue; with
``--limit 0`` (no bound, as before the limit existed) rank 1 grows by what
rank 0 can send, and ``--max-rss`` stops the run before it eats the machine.

Not part of ``run.py`` (it runs for a minute on purpose)::

    python benchmarks/backpressure_rss.py [--seconds 60] [--limit BYTES]

Prints a row per ten seconds and a summary: each rank's memory after the
first second, its least and most, the receiver's most held bytes and
unexpected messages, how often reading stopped, and that every message
arrived in order and intact. Nothing is asserted; the exit status is 1 only
when the job fails or a message is wrong.
"""

from __future__ import annotations

import itertools
import os
import struct
import sys
import time
from typing import Any

import _common as common

SIZE = 1 << 20
COMPUTE = 0.020
#: A message's first bytes: its sequence number; the rest is the same for all.
_SEQ = struct.Struct("<Q")
_STOP = 6


def _rss() -> int:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


def _role_job(options: dict[str, Any]) -> None:
    from mpi4py import MPI

    import pmca

    comm = MPI.COMM_WORLD
    me = comm.Get_rank()
    seconds, limit, max_rss = options["seconds"], options["limit"], options["max_rss"]
    body = bytes(range(256)) * ((SIZE - _SEQ.size) // 256) + bytes((SIZE - _SEQ.size) % 256)
    mca = {"btl": "self,tcp", "btl_tcp_recv_queue_limit": limit}
    samples: list[int] = []
    figures: dict[str, Any] = {}
    with pmca.Session(mca=mca, world=pmca.world.from_mpi(comm)) as s:
        p2p = s.p2p
        comm.barrier()
        began = time.monotonic()
        next_sample = began + 1
        if me == 0:
            sent = 0
            while time.monotonic() - began < seconds:
                p2p.send(1, 5, _SEQ.pack(sent) + body)
                sent += 1
                if time.monotonic() >= next_sample:
                    samples.append(_rss())
                    next_sample += 1
            p2p.send(1, _STOP, _SEQ.pack(sent))
            figures["sent"] = sent
        else:
            into = bytearray(SIZE)
            received, wrong, stopped_early = 0, 0, False
            while True:
                status = p2p.recv(0, pmca.ANY_TAG, into, status=True)
                if status.tag == _STOP:
                    break
                if _SEQ.unpack_from(into)[0] != received or into[_SEQ.size :] != body:
                    wrong += 1
                received += 1
                computing = time.monotonic() + COMPUTE
                while time.monotonic() < computing:
                    p2p.progress()
                    time.sleep(0.001)
                    now = time.monotonic()
                    if now >= next_sample:
                        samples.append(_rss())
                        next_sample += 1
                if samples and samples[-1] > max_rss:
                    stopped_early = True  # unbounded: do not eat the machine
                    break
            tcp = next(m for m in s._data_path().bml.modules if m.name == "tcp")
            figures.update(
                received=received,
                wrong=wrong,
                stopped_early=stopped_early,
                held_peak=p2p.held_peak,
                unexpected_peak=p2p.unexpected_peak,
                pauses=sum(c.pauses for c in tcp.connections().values()),
            )
            if stopped_early:
                comm.Abort(3)  # the sender blocks in send otherwise
        comm.barrier()
    everything = comm.gather({"samples": samples, **figures}, root=0)
    if me == 0:
        common.child_reply({"ranks": everything})


def _print(result: dict[str, Any], limit: int) -> bool:
    sender, receiver = result["ranks"]
    mib = 1 << 20
    print(f"btl_tcp_recv_queue_limit = {limit / mib:g} MiB, messages of {SIZE / mib:g} MiB")
    print(f"{'second':>6} {'sender RSS MiB':>15} {'receiver RSS MiB':>17}")
    rows = itertools.zip_longest(sender["samples"], receiver["samples"])
    for second, row in enumerate(rows, start=1):
        if second == 1 or second % 10 == 0:
            shown = [f"{rss / mib:.1f}" if rss is not None else "-" for rss in row]
            print(f"{second:>6} {shown[0]:>15} {shown[1]:>17}")
    for name, figures in (("sender", sender), ("receiver", receiver)):
        kept = figures["samples"][1:] or figures["samples"]
        first = figures["samples"][0]
        print(
            f"{name}: RSS at 1 s {first / mib:.1f} MiB; from 2 s on least {min(kept) / mib:.1f}, "
            f"most {max(kept) / mib:.1f} MiB (spread {(max(kept) - min(kept)) / mib:.1f} MiB)"
        )
    print(
        f"sent {sender['sent']}, received {receiver['received']}, wrong {receiver['wrong']}; "
        f"receiver held at most {receiver['held_peak'] / mib:.2f} MiB "
        f"({receiver['unexpected_peak']} unexpected messages); reading stopped "
        f"{receiver['pauses']} times"
    )
    return receiver["wrong"] == 0 and receiver["received"] == sender["sent"]


def main() -> None:
    options = common.parser(__doc__.splitlines()[0])
    options.add_argument("--seconds", type=float, default=60.0)
    options.add_argument("--limit", type=int, default=16 << 20, help="btl_tcp_recv_queue_limit")
    options.add_argument(
        "--max-rss", type=int, default=4 << 30, help="stop a receiver that grows past this"
    )
    args = options.parse_args()
    if common.serve_child(args, {"job": _role_job}):
        return
    launcher = common.open_mpi()
    if launcher is None:
        sys.exit("needs Open MPI's mpirun and mpi4py: pip install 'pmca[mpi]'")
    print(f"pmca from {common.pmca_location()}")
    job = {"seconds": args.seconds, "limit": args.limit, "max_rss": args.max_rss}
    result = launcher.run(__file__, "job", job, timeout=args.seconds + 300)
    sys.exit(0 if _print(result, args.limit) else 1)


if __name__ == "__main__":
    main()
