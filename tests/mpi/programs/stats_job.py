"""Each rank builds the launcher's world and keeps what it prints, opens a session (its
live view on under the launcher); rank 0 then runs ``pmca stats --job`` from the
launcher's environment it inherited, and writes what it read.

No mpi4py: the ranks meet through files in a directory the test gives.
"""

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pmca
from pmca._job import job_identity

parser = argparse.ArgumentParser()
parser.add_argument("--dir", required=True)
parser.add_argument("--ranks", type=int, required=True)
args = parser.parse_args()
meeting = Path(args.dir)
identity = job_identity(os.environ)
assert identity is not None, "no launcher environment"
rank = identity[1]
with pmca.world.from_launcher() as world:  # what the world prints for the job
    printed = world.description

with pmca.Session(frameworks=["btl"]) as s:  # pmca_base_live_view auto: on under a launcher
    s.p2p.send(0, 1, b"x" * 10)
    s.p2p.recv(0, 1, bytearray(10))
    slurm = [os.environ.get("SLURM_JOB_ID"), os.environ.get("SLURM_STEP_ID")]
    mine = {"pid": os.getpid(), "job": identity[0], "slurm": slurm, "world": printed}
    (meeting / f"rank{rank}").write_text(json.dumps(mine))
    deadline = time.monotonic() + 120
    if rank == 0:
        while time.monotonic() < deadline:
            if len(list(meeting.glob("rank*"))) == args.ranks:
                done = subprocess.run(
                    [sys.executable, "-m", "pmca", "stats", "--job", "--json"],
                    capture_output=True,
                    text=True,
                    timeout=60,
                    check=False,
                )
                ranks = []
                if done.returncode == 0:
                    ranks = [p["rank"] for p in json.loads(done.stdout)["processes"]]
                if len(ranks) == args.ranks or time.monotonic() > deadline - 10:
                    read = {"code": done.returncode, "out": done.stdout, "err": done.stderr}
                    (meeting / "stats.json").write_text(json.dumps(read))
                    break
            time.sleep(0.1)
        (meeting / "stop").touch()
    else:
        while not (meeting / "stop").exists() and time.monotonic() < deadline:
            time.sleep(0.05)
