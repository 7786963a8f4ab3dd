"""The world the launcher of this process offers: PMIx, else PMI, else one process.

A program started by Open MPI's ``mpirun`` (PRRTE), or by Slurm with PMIx,
finds ``PMIX_NAMESPACE``/``PMIX_RANK`` in its environment; one started by
MPICH's Hydra ``mpiexec`` finds ``PMI_FD``; one started by hand finds
neither and is a world of one. :func:`from_launcher` looks in that order,
and says which it chose and why (at verbosity 1 or more), so a program needs
no change to become a world of N ranks under a launcher.
"""

from __future__ import annotations

import os
from collections.abc import Mapping

from .._public import public
from ..mca._logging import framework_logger
from ._interface import DEFAULT_TIMEOUT, LauncherError, World

#: ``pmca_base_world`` values.
WORLD_KINDS = ("single", "launcher", "pmix", "pmi")
#: Verbosity (Open MPI's 0-100 scale) at which a message is shown as info.
_INFO = 40


def detect(environ: Mapping[str, str] | None = None) -> tuple[str, str]:
    """``(kind, why)``: which world the environment offers, and the evidence."""
    env = os.environ if environ is None else environ
    if "PMIX_NAMESPACE" in env and "PMIX_RANK" in env:
        return "pmix", (
            f"PMIX_NAMESPACE={env['PMIX_NAMESPACE']} and PMIX_RANK={env['PMIX_RANK']} "
            "are set (a PMIx server such as mpirun's started this process)"
        )
    if "PMI_FD" in env:
        return "pmi", (
            f"PMI_FD={env['PMI_FD']} is set (a PMI server such as MPICH's mpiexec "
            "or Slurm's --mpi=pmi2 started this process)"
        )
    return "single", "neither PMIX_NAMESPACE/PMIX_RANK nor PMI_FD is set"


def build(
    kind: str,
    *,
    timeout: float | None = None,
    verbose: int = 0,
    destination: str = "stderr",
    pmi_version: str = "auto",
) -> World:
    """The world of ``kind`` (one of :data:`WORLD_KINDS`), as ``pmca_base_world`` names it.

    ``pmi_version`` (``pmca_base_pmi_version``) picks PMI-2 or PMI-1 for a PMI world;
    ``timeout`` (default :data:`DEFAULT_TIMEOUT`) bounds each launcher answer and is the
    world's bound for a collective called without one.
    """
    log = framework_logger("world", _INFO if verbose >= 1 else 0, destination)
    if kind == "launcher":
        kind, why = detect()
        log.info("world from the launcher", kind=kind, why=why)
    elif kind not in WORLD_KINDS:
        raise LauncherError(f"pmca_base_world={kind!r}: expected one of {', '.join(WORLD_KINDS)}")
    if kind == "pmix":
        from ._pmix import from_pmix

        pmix = from_pmix(timeout=DEFAULT_TIMEOUT if timeout is None else timeout)
        if pmix.refused_events:
            log.info(
                "the PMIx server refused failure events",
                refused=pmix.refused_events,
                lost="a failure of these kinds reaches pmca only when a btl notices it "
                "(a closed connection, tcp keepalive), not at once from the launcher",
            )
        world: World = pmix
    elif kind == "pmi":
        from ._pmi import from_pmi

        pmi = from_pmi(timeout=timeout, version=pmi_version)
        log.info("PMI version", protocol=pmi.protocol, why=pmi.why)
        world = pmi
    else:
        from ._single import single

        world = single()
    log.info("world built", world=world.description, rank=world.rank, size=world.size)
    return world


@public
def from_launcher(
    *, timeout: float | None = None, verbose: int = 0, pmi_version: str = "auto"
) -> World:
    """The world this process's launcher offers: PMIx, else PMI, else a single process.

    Every rank of the job must call it. ``timeout`` (seconds, default
    :data:`~pmca.world.DEFAULT_TIMEOUT`, 60) bounds each PMI answer and is
    the world's bound for a collective called without one;
    ``verbose`` (0-100) at 1 or more logs which world was chosen and why
    (and for PMI, which version); ``pmi_version`` is ``"auto"`` (PMI-2 where
    the server offers it, else PMI-1), ``"1"`` or ``"2"``.
    The world is a context manager (``with pmca.world.from_launcher() as
    w:`` closes it); a session that built it itself
    (``Session(world="launcher")``) closes it at finalize, and one never
    closed is closed at the interpreter's exit, before mpi4py finalizes MPI.
    """
    return build("launcher", timeout=timeout, verbose=verbose, pmi_version=pmi_version)
