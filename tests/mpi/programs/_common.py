"""Shared by the programs the mpi tests launch: one session per rank over COMM_WORLD."""

from __future__ import annotations

import argparse
import hashlib
import sys

from mpi4py import MPI

import pmca

_RESULT = []


def arguments(extra=()):
    parser = argparse.ArgumentParser()
    parser.add_argument("--btl", required=True)
    parser.add_argument("--result", default=None, help="also append report lines to this file")
    for name, kwargs in extra:
        parser.add_argument(name, **kwargs)
    parsed = parser.parse_args()
    _RESULT.append(parsed.result)
    return parsed


def session(btl, **mca):
    return pmca.Session(mca={"btl": btl, **mca}, world=pmca.world.from_mpi(MPI.COMM_WORLD))


def payload(*key, size):
    """Deterministic bytes for (key, size): cheap to make, and any corruption shows."""
    seed = hashlib.blake2b(repr(key).encode(), digest_size=8).digest()
    block = hashlib.blake2b(seed, digest_size=64).digest() * 1024  # 64 KiB
    reps, rest = divmod(size, len(block))
    return block * reps + block[:rest]


def digest(data):
    return hashlib.blake2b(bytes(data) if not isinstance(data, bytes) else data).hexdigest()


def report(ok, message=""):
    rank = MPI.COMM_WORLD.Get_rank()
    line = f"{'OK' if ok else 'FAIL'} rank {rank} {message}"
    print(line, flush=True)
    if _RESULT and _RESULT[0]:
        # Launchers may stop forwarding output once a rank died: the file is certain.
        with open(_RESULT[0], "a") as f:
            f.write(line + "\n")
    if not ok:
        sys.exit(1)
