"""Two ranks on two hosts joined by several networks: large messages across every rail.

Rank 0 sends ``--size`` bytes to rank 1 ``--repeats`` times (checksummed),
and reports the btls that reach rank 1, the transfer rate, and how many
bytes each of its interfaces sent (from /proc/net/dev, this host's own).
"""

import time

from _common import arguments, digest, payload, report, session

args = arguments(
    [
        ("--size", {"type": int, "default": 64 << 20}),
        ("--repeats", {"type": int, "default": 3}),
        ("--if-include", {"default": ""}),
        ("--if-bandwidth", {"default": ""}),
    ]
)


def sent_bytes():
    with open("/proc/net/dev") as f:
        lines = f.read().splitlines()[2:]
    counts = {}
    for line in lines:
        name, fields = line.split(":", 1)
        counts[name.strip()] = int(fields.split()[8])
    return counts


mca = {"btl_tcp_if_include": args.if_include} if args.if_include else {}
if args.if_bandwidth:
    mca["btl_tcp_if_bandwidth"] = args.if_bandwidth
with session(args.btl, **mca) as s:
    p = s.p2p
    me = p.rank
    data = payload("rails", args.size, size=args.size)
    out = bytearray(args.size)
    reach = s.reach(1 - me)
    p.send(1 - me, 0, b"ready") if me == 0 else p.recv(0, 0, bytearray(5))
    before = sent_bytes()
    times = []
    for round_ in range(args.repeats):
        start = time.perf_counter()
        if me == 0:
            p.send(1, 1 + round_, data)
            p.recv(1, 1 + round_, bytearray(1))
        else:
            p.recv(0, 1 + round_, out)
            assert digest(out) == digest(data), f"round {round_} corrupted"
            p.send(0, 1 + round_, b"k")
        times.append(time.perf_counter() - start)
    after = sent_bytes()
    moved = {k: after[k] - before.get(k, 0) for k in after if k.startswith("net")}
    rate = args.size / sorted(times)[len(times) // 2] / 1e6
report(True, f"reach={','.join(reach)} rate={rate:.1f}MB/s sent={moved}")
