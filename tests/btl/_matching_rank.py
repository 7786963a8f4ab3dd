"""One rank of the several-senders matching test (run by test_matching_ranks.py).

Usage: ``_matching_rank.py RANK SIZE SOCKET MCA_JSON [BROKEN]``. Joins a test
socket world, opens a session, answers ``RESULT {...}`` once ready, then runs
each round read from stdin (one JSON line each) and answers one ``RESULT``
line per round: rank 0 receives and checks, the others send. ``BROKEN``
breaks this process's matching on purpose (see ``break_matching``).
"""

from __future__ import annotations

import json
import sys
import traceback
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

import pmca
from tests.btl._matching_rules import Round, break_matching, receive_round, send_round
from tests.btl.sm._world import SocketWorld

#: Seconds any one wait of a round may take (generous: the machine may be loaded).
TIMEOUT = 120.0


def answer(result: dict[str, object]) -> None:
    sys.stdout.write("RESULT " + json.dumps(result) + "\n")
    sys.stdout.flush()


def main() -> None:
    rank, size, path, mca = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3], json.loads(sys.argv[4])
    if len(sys.argv) > 5:
        break_matching(sys.argv[5])
    world = SocketWorld(rank, size, path)
    try:
        with pmca.Session(mca=mca, world=world) as s:
            p2p = s.p2p
            answer({"reach": {peer: s.reach(peer) for peer in range(size) if peer != rank}})
            for line in sys.stdin:
                round_ = Round.from_json(json.loads(line))
                try:
                    if rank == 0:
                        answer({"violations": receive_round(p2p, round_, TIMEOUT)})
                    else:
                        answer({"sent": send_round(p2p, round_, 0, TIMEOUT)})
                except Exception:
                    answer({"error": traceback.format_exc()})
    finally:
        world.close()


if __name__ == "__main__":
    main()
