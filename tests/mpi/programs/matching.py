"""Rank 0 receives from every other rank by a seeded mix of specific and wildcard receives
and probes; what it got is checked against MPI's matching rules (see tests/btl/_matching_rules).

Every rank draws the same rounds from ``--seed``; a barrier separates rounds.
"""

from __future__ import annotations

import random
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[3]))

from _common import arguments, report, session
from mpi4py import MPI
from tests.btl._matching_rules import draw, receive_round, send_round

args = arguments(
    [
        ("--rounds", {"type": int, "default": 25}),
        ("--seed", {"type": int, "default": 0}),
    ]
)
T = 120
# tcp's eager limit comes down so that the larger sizes take its rendezvous
extra = {"btl_tcp_eager_limit": "32k"} if "tcp" in args.btl.split(",") else {}

with session(args.btl, **extra) as s:
    p = s.p2p
    senders = list(range(1, p.size))
    problems = []
    for number in range(1, args.rounds + 1):
        round_ = draw(random.Random(args.seed * 1_000_003 + number), number, senders)
        if p.rank == 0:
            found = receive_round(p, round_, T)
            problems += [f"seed {args.seed} round {number}: {problem}" for problem in found]
        else:
            send_round(p, round_, 0, T)
        MPI.COMM_WORLD.Barrier()  # the next round's messages only once this one's are taken
    MPI.COMM_WORLD.Barrier()
    report(not problems, f"matching {args.btl} " + "\n".join(problems[:20]))
