"""One rank of the MPI coexistence tests (run by mpirun/mpiexec, or alone for UCX only).

argv: ``<order> <load mode> [ucx-library]``

``order`` is ``mpi-first`` (MPI initialised, then pmca's hooks wanted),
``pmca-first`` (pmca's own patches in place, then MPI loaded), or
``ucx-first``/``pmca-then-ucx`` for the same two orders with UCX's libucs
loaded by ``ctypes.CDLL`` instead of MPI.  Even ranks finalize pmca first,
odd ranks finalize MPI (or unload nothing, for UCX) first.  Any broken
promise exits non-zero with the reason; the last line is ``RESULT <json>``.
"""

from __future__ import annotations

import ctypes
import json
import os
import sys
import threading

ORDER, LOAD_MODE = sys.argv[1], sys.argv[2]
UCX_LIBRARY = sys.argv[3] if len(sys.argv) > 3 else ""
from pmca.testing.plugin import LOAD_MODE_VARIABLE  # noqa: E402

if LOAD_MODE == "dso":
    os.environ[LOAD_MODE_VARIABLE] = "all"
else:
    os.environ.pop(LOAD_MODE_VARIABLE, None)

# glibc only takes its arena locks once a second thread has existed.
_thread = threading.Thread(target=lambda: None)
_thread.start()
_thread.join()

from pmca import memory, native  # noqa: E402
from pmca._libc import PAGE, libc  # noqa: E402
from pmca.session import Session  # noqa: E402

USES_MPI = ORDER in ("mpi-first", "pmca-first")
hooks = native.backend()
c = libc()
released: list[tuple[int, int, str]] = []
steps: list[dict[str, object]] = []


def fail(reason: str) -> None:
    print(f"RANK FAILED ({ORDER}, {LOAD_MODE}): {reason}", flush=True)
    print("steps: " + json.dumps(steps), flush=True)
    os._exit(1)


def prologues() -> dict[str, str]:
    return {symbol: hooks.prologue(symbol, 16).hex(" ") for symbol in hooks.symbols}


def on_release(address: int, length: int, kind: str, from_alloc: bool) -> None:
    released.append((address, length, kind))


def check_delivery(step: str, count: int = 16) -> None:
    """Every munmap of a known address is delivered, as itself (not as an overflow)."""
    regions = [c.map_anonymous(4 * PAGE) for _ in range(count)]
    mark = len(released)
    for region in regions:
        c.munmap(region, 4 * PAGE)
    memory.drain()
    events = released[mark:]
    missing = [
        hex(r)
        for r in regions
        if not any(a <= r < a + n for a, n, kind in events if kind != "overflow")
    ]
    if missing:
        fail(f"{step}: munmap of {missing} not delivered (got {events[-5:]})")


def expect_support(step: str, source: str) -> None:
    support = memory.support_level()
    modules = session.modules("memory")
    current = getattr(modules[0], "source", None) if modules else None
    steps.append({"step": step, "support": int(support), "source": current})
    if support != memory.FREE | memory.MUNMAP:
        fail(f"{step}: support_level() is {support!r}")
    if current != source:
        fail(f"{step}: events come from {current!r}, expected {source!r}")
    # Truthful: what the level claims, a fresh self-test of that source proves.
    proof = native.self_test(source="ucm" if source == "ucm" else "patches")
    if not all(proof[s] for s in ("munmap", "madvise", "mremap", "brk")):
        fail(f"{step}: support_level() claims FREE|MUNMAP but the self-test says {proof}")


def load_mpi_or_ucx() -> object:
    if USES_MPI:
        import mpi4py

        mpi4py.rc.initialize = False
        mpi4py.rc.finalize = False
        from mpi4py import MPI

        MPI.Init_thread(MPI.THREAD_MULTIPLE)
        return MPI
    return ctypes.CDLL(UCX_LIBRARY)


def traffic(mpi: object) -> None:
    """Let MPI allocate and free on its own (large messages go through UCX)."""
    if not USES_MPI:
        return
    comm = mpi.COMM_WORLD  # type: ignore[attr-defined]
    for size in (1 << 10, 1 << 20, 8 << 20):
        data = comm.bcast(b"x" * size if comm.Get_rank() == 0 else None, root=0)
        if len(data) != size:
            fail("bcast returned the wrong size")
    comm.Barrier()


original = prologues()
mpi = None
if ORDER in ("mpi-first", "ucx-first"):
    mpi = load_mpi_or_ucx()
    owned = prologues()
    if owned == original:
        fail("UCX did not patch libc: nothing to coexist with")

session = Session(frameworks=["memory"])
session.__enter__()
selected = [c_.name for c_ in session.components("memory") if c_.selected]
handle = memory.register_release(on_release)

if ORDER in ("mpi-first", "ucx-first"):
    if selected != ["ucm"]:
        fail(f"libc already patched by UCX, but memory selected {selected}")
    expect_support("after register_release", "ucm")
    if prologues() != owned:
        fail("pmca changed libc's prologues although UCX owns them")
else:
    if selected != ["patcher"]:
        fail(f"unpatched libc, but memory selected {selected}")
    expect_support("own patches", "own patches")
    check_delivery("own patches")
    mark = len(released)
    mpi = load_mpi_or_ucx()
    owned = prologues()
    # The very next question is answered truthfully, and the next drain (the
    # listener's, if it woke first) tells every subscriber to drop everything.
    expect_support("after UCX overwrote pmca's patches", "ucm")
    memory.drain()
    if not any(kind == "overflow" for _, _, kind in released[mark:]):
        fail("the overwrite was not reported to subscribers as an overflow")

check_delivery("after MPI/UCX init")
traffic(mpi)
check_delivery("after MPI traffic")

if USES_MPI:
    pmca_first = int(mpi.COMM_WORLD.Get_rank()) % 2 == 0  # type: ignore[attr-defined]
else:
    pmca_first = os.environ.get("PMCA_TEST_FINALIZE", "pmca") == "pmca"


def finalize_pmca() -> None:
    handle.unregister()
    session.__exit__(None, None, None)
    if memory.support_level() != memory.Support.NONE:
        fail("support_level() claims hooks after pmca finalized")
    if native.ucm_source().subscribed:
        fail("still subscribed to ucm after pmca finalized")


def finalize_mpi() -> None:
    if USES_MPI:
        from mpi4py import MPI

        MPI.Finalize()


if pmca_first:
    finalize_pmca()
    check_prologues = prologues()
    finalize_mpi()
else:
    finalize_mpi()
    expect_support("after MPI_Finalize", "ucm")
    check_delivery("after MPI_Finalize")
    finalize_pmca()
    check_prologues = prologues()

# UCX never unpatches: it was the last owner, its jumps must be intact.
if check_prologues != owned or prologues() != owned:
    fail(f"libc prologues changed at finalize: {owned} -> {prologues()}")
# And the process can still release memory through UCX's hooks.
region = c.map_anonymous(PAGE)
c.munmap(region, PAGE)
print(
    "RESULT "
    + json.dumps({"order": ORDER, "pmca_first": pmca_first, "selected": selected, "steps": steps}),
    flush=True,
)
