"""One side of a two-process pmca session across simulated hosts (a socketpair world).

argv: fd rank mca-json; prints one JSON line: hostname, network namespace,
the btls that reach the peer, and whether 0 B-16 MiB messages came back intact.
"""

import hashlib
import json
import os
import socket
import sys

import pmca
from pmca.world import PairWorld

fd, rank, mca = int(sys.argv[1]), int(sys.argv[2]), json.loads(sys.argv[3])
world = PairWorld(socket.socket(fileno=fd), rank)
other = 1 - rank


def payload(key, n):
    block = hashlib.blake2b(repr(key).encode(), digest_size=64).digest() * 1024
    reps, rest = divmod(n, len(block))
    return block * reps + block[:rest]


with pmca.Session(mca=mca, world=world) as s:
    reach = s.reach(other)
    intact = True
    for tag, n in enumerate([0, 1, 8, 65_537, 1 << 20, (4 << 20) + 3, 16 << 20]):
        out = bytearray(n)
        request = s.p2p.irecv(other, tag, out)
        s.p2p.send(other, tag, payload((other, n), n))
        request.wait(timeout=120)
        intact = intact and out == payload((rank, n), n)
print(
    json.dumps(
        {
            "hostname": socket.gethostname(),
            "netns": os.stat("/proc/self/ns/net").st_ino,
            "reach": reach,
            "intact": intact,
        }
    ),
    flush=True,
)
