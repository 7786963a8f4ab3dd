"""A world from the launcher itself (PMIx under mpirun, PMI under mpiexec), one --case each.

No mpi4py unless the case brings MPI in on purpose (before or after the
world is built); every case checks that the world came from the launcher.
"""

import argparse
import hashlib
import os
import signal
import socket
import sys
import time

import pmca

parser = argparse.ArgumentParser()
parser.add_argument("--case", required=True)
parser.add_argument("--expect", required=True, help="pmix or pmi")
parser.add_argument("--result", required=True)
parser.add_argument("--btl", default="self,sm,tcp")
parser.add_argument("--pmi-version", default="auto", help="as pmca_base_pmi_version")
parser.add_argument("--sizes", default="0,1,4097,1048576", help="hosts: bytes between every pair")
parser.add_argument("--survivors", default="report", help="killed-hosts: report or wait")
args = parser.parse_args()

SIZES = [0, 1, 7, 4095, 4096, 65_537, 1 << 20, (4 << 20) + 3, 64 << 20]
KIND = {"pmix": "PmixWorld", "pmi": "PmiWorld"}[args.expect]  # PMI-1 or PMI-2
# pmca_base_pmi_version, for the cases that build the world without a session.
PMI_VERSION = args.pmi_version


def report(ok, rank, message):
    line = f"{'OK' if ok else 'FAIL'} rank {rank} {message}"
    print(line, flush=True)
    with open(args.result, "a") as f:  # launchers may stop forwarding output
        f.write(line + "\n")
    if not ok:
        sys.exit(1)


def payload(*key, size):
    seed = hashlib.blake2b(repr(key).encode(), digest_size=8).digest()
    block = hashlib.blake2b(seed, digest_size=64).digest() * 1024
    reps, rest = divmod(size, len(block))
    return block * reps + block[:rest]


def check_world(s):
    world = s.world
    assert isinstance(world, getattr(pmca.world, KIND)), world
    assert "mpi4py" not in sys.modules or args.case.startswith("mpi-"), sorted(sys.modules)
    return world


def ring(s, sizes):
    p = s.p2p
    me, size = p.rank, p.size
    right, left = (me + 1) % size, (me - 1) % size
    for index, n in enumerate(sizes):
        out = bytearray(n)
        request = p.irecv(left, index, out)
        p.send(right, index, payload(me, n, size=n))
        assert request.wait(timeout=120) == n
        expected = hashlib.blake2b(payload(left, n, size=n)).hexdigest()
        assert hashlib.blake2b(out).hexdigest() == expected, f"{n} bytes from {left} corrupted"


if args.case == "sizes":
    # The program names no world: pmca_base_world=launcher comes from the environment.
    with pmca.Session(mca={"btl": args.btl}) as s:
        world = check_world(s)
        me = world.rank
        assert "mpi4py" not in sys.modules
        right = (me + 1) % world.size
        reach = s.reach(right)
        assert isinstance(world, pmca.world.LauncherWorld)
        locality = world.locality()  # one host: every rank local, by the launcher's word
        assert locality is not None and locality.local == frozenset(range(world.size))
        assert len(set(locality.hosts)) == 1, locality
        assert reach[0] == "sm" and "tcp" in reach, reach
        ring(s, SIZES)
    # A second session builds its world again (PMIx counts its initializations).
    with pmca.Session(mca={"btl": args.btl}) as s:
        check_world(s)
        ring(s, [1, 70_000])
    report("mpi4py" not in sys.modules, me, f"{world.description} sizes 0..64MiB reach {reach}")

elif args.case == "killed":
    # Rank 1 is killed; rank 0 learns it from the launcher's PMIx event, well
    # before tcp keepalive could tell (run with --btl self,sm: over tcp on one
    # host the kernel's FIN would tell first; the event is for hosts that die).
    with pmca.Session(world="launcher", mca={"btl": args.btl}) as s:
        world = check_world(s)
        me = world.rank
        if me == 1:
            with open(args.result, "a") as f:
                f.write(f"DIES {time.monotonic():.6f}\n")
            os.kill(os.getpid(), signal.SIGKILL)
        time.sleep(1)  # not progressing: the notice waits in the world's pipe
        start = time.monotonic()
        try:
            s.p2p.recv(1, 1, bytearray(10), timeout=30)
        except pmca.btl.PeerFailed as exc:
            with open(args.result) as f:
                died = float(next(line for line in f if line.startswith("DIES")).split()[1])
            notice = str(exc)
            since_death = time.monotonic() - died
            assert exc.rank == 1 and "launcher reports rank 1 on host " in notice, notice
            report(
                True,
                me,
                f"peer error {since_death:.2f}s after the death "
                f"({time.monotonic() - start:.2f}s of waiting): {notice}",
            )
        else:
            report(False, me, "no error although rank 1 was killed")
    os._exit(0)

elif args.case in ("mpi-before", "mpi-after"):
    if args.case == "mpi-before":
        from mpi4py import MPI

        MPI.COMM_WORLD.Barrier()
    s = pmca.Session(world="launcher", mca={"btl": args.btl}).init()
    world = check_world(s)
    if args.case == "mpi-after":
        from mpi4py import MPI
    me = world.rank
    assert MPI.COMM_WORLD.Get_rank() == me and MPI.COMM_WORLD.Get_size() == world.size
    ring(s, [0, 100, 1 << 20])
    world.barrier(timeout=30)
    assert MPI.COMM_WORLD.allgather(me) == list(range(world.size))
    s.finalize()  # closes the world (PMIx_Finalize, or PMI left to MPI)
    assert MPI.COMM_WORLD.allreduce(1) == world.size
    library = MPI.Get_library_version()[:20]
    report(True, me, f"{args.case}: {world.description} beside {library!r}")

elif args.case == "silent":
    # Rank 1 joins the job but never the modex: rank 0's init fails, naming
    # the launcher's protocol, within pmca_base_modex_timeout.
    world = pmca.world.from_launcher(pmi_version=PMI_VERSION)
    me = world.rank
    if me == 1:
        time.sleep(8)
        world.close()
        sys.exit(0)
    start = time.monotonic()
    try:
        pmca.Session(world=world, mca={"btl": args.btl, "pmca_base_modex_timeout": 3}).init()
    except pmca.btl.ModexError as exc:
        elapsed = time.monotonic() - start
        assert "PMI" in str(exc) and "pmca_base_modex_timeout" in str(exc), exc
        report(elapsed < 3 + 3, me, f"modex error after {elapsed:.2f}s: {exc}")
    else:
        report(False, me, "init succeeded without rank 1")
    world.close()

elif args.case == "too-large":
    world = pmca.world.from_launcher(pmi_version=PMI_VERSION)
    me = world.rank
    try:
        world.allgather(bytes(4 << 20), timeout=30)
    except pmca.world.LauncherError as exc:
        assert "PMI" in str(exc) and "4194304 bytes" in str(exc), exc
        report(True, me, f"too large: {exc}")
    else:
        report(False, me, "a 4 MiB entry went through PMI")
    world.close()
elif args.case == "hosts":
    # Ranks on several (simulated) hosts: the launcher's placement agrees with
    # where each rank finds itself, sm reaches exactly the ranks on its host.
    with pmca.Session(world="launcher", mca={"btl": args.btl}) as s:
        world = check_world(s)
        me, size = world.rank, world.size
        here = (socket.gethostname(), os.readlink("/proc/self/ns/net"))
        everyone = [
            tuple(x.decode().split("\0")) for x in world.allgather("\0".join(here).encode())
        ]
        locality = world.locality()
        assert locality is not None, "the launcher gave no placement"
        assert len(locality.hosts) == size, locality
        same_host = frozenset(r for r in range(size) if everyone[r] == here)
        assert locality.local == same_host, (locality, everyone)
        for a in range(size):  # the launcher's hosts group the ranks as they find themselves
            for b in range(size):
                assert (locality.hosts[a] == locality.hosts[b]) == (everyone[a] == everyone[b]), (
                    locality,
                    everyone,
                )
        if args.expect == "pmix":  # PMIx names each rank's host (PMIX_HOSTNAME)
            assert [h.split(".")[0] for h in locality.hosts] == [e[0] for e in everyone], (
                locality,
                everyone,
            )
        for rank in range(size):
            if rank == me:
                continue
            reach = s.reach(rank)
            if rank in same_host:
                assert reach[0] == "sm", (rank, reach, everyone)
            else:
                assert "sm" not in reach and "tcp" in reach, (rank, reach, everyone)
        p = s.p2p
        for step in range(1, size):  # every pair, both ways, checksummed
            right, left = (me + step) % size, (me - step) % size
            for index, n in enumerate(int(size) for size in args.sizes.split(",")):
                out = bytearray(n)
                request = p.irecv(left, index, out)
                p.send(right, index, payload(me, right, n, size=n))
                assert request.wait(timeout=120) == n
                expected = hashlib.blake2b(payload(left, me, n, size=n)).hexdigest()
                assert hashlib.blake2b(out).hexdigest() == expected, f"{n} B from {left} corrupted"
        hosts = ",".join(locality.hosts)
        local = sorted(locality.local)
    report(
        "mpi4py" not in sys.modules,
        me,
        f"on {here[0]}: {world.description} hosts {hosts} local {local} every pair checksummed",
    )

elif args.case == "killed-hosts":
    # The last rank is killed; every other learns it from whichever side
    # notices first (its host's kernel closing the tcp connections, sm's
    # liveness check, the launcher), named by rank and host.
    with pmca.Session(world="launcher", mca={"btl": args.btl}) as s:
        world = check_world(s)
        me, victim = world.rank, world.size - 1
        hosts = [h.decode() for h in world.allgather(socket.gethostname().encode())]
        if me == victim:
            with open(args.result, "a") as f:
                f.write(f"DIES {time.time():.6f}\n")
            os.kill(os.getpid(), signal.SIGKILL)
        if args.survivors == "wait":  # srun -K: the step ends before anyone reports
            time.sleep(60)
        try:
            s.p2p.recv(victim, 1, bytearray(10), timeout=30)
        except pmca.btl.PeerFailed as exc:
            with open(args.result) as f:
                died = float(next(line for line in f if line.startswith("DIES")).split()[1])
            notice = str(exc)
            assert exc.rank == victim and f"rank {victim}" in notice, notice
            assert f"host {hosts[victim]}" in notice, (hosts[victim], notice)
            where = "same host" if hosts[victim] == hosts[me] else "other host"
            report(True, me, f"({where}) peer error {time.time() - died:.3f}s after: {notice}")
        else:
            report(False, me, "no error although the last rank was killed")
    os._exit(0)

else:
    raise SystemExit(f"unknown case {args.case}")
