"""A rank of a tcp session disturbed at the modex: by strangers, or out of descriptors.

``pair FD RANK MCA-JSON WHAT``: one rank of a socket-pair world, one session;
prints one JSON line: the seconds init and finalize took and whether a
message went both ways intact, or the error init raised.

``mpi DIR MCA-JSON``: under a launcher, every rank opens sessions over
``MPI.COMM_WORLD`` in turn, undisturbed and with silent strangers, twice
each, and writes ``DIR/rank<N>.json``: the init times of each kind.

``WHAT``: ``none``; ``silent`` (before the modex, a stranger connects to
each of this rank's listeners and sends nothing); ``short`` (a stranger
sends the first 5 bytes of a hello, then nothing); ``exhaust`` (after the
modex, ``RLIMIT_NOFILE`` is lowered to the descriptors open and every free
one below it is taken, so tcp's next ``socket`` or ``accept`` fails);
``fault:CALL:ERRNO`` (after the modex, ``PMCA_TEST_FAULT`` is set to
``CALL:ERRNO``: with ``_socket_faults.c`` preloaded, every later ``CALL``
fails with ``ERRNO``).
"""

import json
import os
import resource
import socket
import sys
import time

import pmca
from pmca.btl import BtlError
from pmca.btl.base._modex import unpack
from pmca.btl.tcp import _wire as wire
from pmca.world import PairWorld

#: Strangers' sockets and descriptors taken: held until this process exits.
held: list[object] = []
limits: dict[str, int] = {}


def send_strangers(rank: int, blob: bytes, what: str) -> None:
    """A stranger on each tcp listener ``blob`` (this rank's modex entry) publishes."""
    for entry in wire.unpack_address(rank, unpack(rank, blob).addresses["tcp"]).interfaces:
        family = socket.AF_INET6 if ":" in entry.address else socket.AF_INET
        stranger = socket.socket(family, socket.SOCK_STREAM)
        stranger.connect((entry.address, entry.port))
        if what == "short":
            stranger.sendall(wire.HELLO.pack(wire.HELLO_MAGIC, rank, b"\0" * 8)[:5])
        held.append(stranger)


def exhaust() -> None:
    highest = max(int(name) for name in os.listdir("/proc/self/fd"))
    _, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (highest + 1, hard))
    limits.update(soft=highest + 1, hard=hard)
    while True:
        try:
            held.append(os.open(os.devnull, os.O_RDONLY))
        except OSError:
            break


class Disturbing:
    """A world that disturbs this rank around its first allgather (the modex)."""

    rank: int
    what = "none"
    modex_done = False

    def allgather(self, data: bytes, *, timeout: float | None = None) -> list[bytes]:
        first = not self.modex_done
        self.modex_done = True
        if first and self.what in ("silent", "short"):
            send_strangers(self.rank, data, self.what)  # before the peer learns the port
        gathered: list[bytes] = super().allgather(data, timeout=timeout)  # type: ignore[misc]
        if first and self.what == "exhaust":
            exhaust()
        if first and self.what.startswith("fault:"):
            os.environ["PMCA_TEST_FAULT"] = self.what.removeprefix("fault:")
        return gathered


class DisturbedPair(Disturbing, PairWorld):
    pass


def timed_session(mca: dict[str, object], world: object, me: int) -> dict[str, object]:
    """Init a session over ``world`` (of 2 ranks), exchange a message, finalize."""
    other = 1 - me
    report: dict[str, object] = {}
    started = time.monotonic()
    try:
        session = pmca.Session(mca=mca, world=world).init()
    except Exception as exc:
        report.update(
            error=type(exc).__name__,
            message=str(exc),
            btl_error=isinstance(exc, BtlError),
            limits=limits,
        )
        return report
    report["init"] = time.monotonic() - started
    out = bytearray(18)
    request = session.p2p.irecv(other, 7, out)
    session.p2p.send(other, 7, b"from rank %8d" % me)
    request.wait(timeout=120)
    report["intact"] = bytes(out) == b"from rank %8d" % other
    started = time.monotonic()
    session.finalize()
    report["finalize"] = time.monotonic() - started
    return report


def pair(fd: int, rank: int, mca: dict[str, object], what: str) -> None:
    world = DisturbedPair(socket.socket(fileno=fd), rank)
    world.what = what
    print(json.dumps({"rank": rank, **timed_session(mca, world, rank)}), flush=True)


def launched(directory: str, mca: dict[str, object]) -> None:
    from mpi4py import MPI

    from pmca.world._mpi import MpiWorld

    class DisturbedMpi(Disturbing, MpiWorld):
        pass

    rank = MPI.COMM_WORLD.Get_rank()
    times: dict[str, list[object]] = {"none": [], "silent": []}
    for what in ("none", "silent", "none", "silent"):
        world = DisturbedMpi(MPI.COMM_WORLD)
        world.what = what
        times[what].append(timed_session(mca, world, rank))
        world.free()
    with open(os.path.join(directory, f"rank{rank}.json"), "w") as f:
        json.dump(times, f)


if __name__ == "__main__":
    if sys.argv[1] == "pair":
        pair(int(sys.argv[2]), int(sys.argv[3]), json.loads(sys.argv[4]), sys.argv[5])
    else:
        launched(sys.argv[2], json.loads(sys.argv[3]))
