"""The seed scenarios of pmca's memory hooks, each reproduced and each prevented.

Runs, each in fresh child processes with real hooks on libc:

1. open-mpi/ompi#13021: DSO double finalize (the reproduction rows are
   skipped unless the ``pmca-ompi-13021`` plugin is installed);
2. open-mpi/ompi#13149 / ofiwg/libfabric#10879: the madvise self-deadlock,
   on a model of Open MPI's hooks and libfabric 2.5.1's MR cache, under real
   mimalloc (needs x86_64 and the ``pmca-madvise-deadlock`` plugin, which
   brings ``cmeel-mimalloc``; skipped with the reason otherwise); the
   reproduction is a race, run until its first self-deadlock, at most 8
   runs of 10 s: one that does not hit in those fails the table;
3. Open MPI's hook activation rules (16 cells) and the release-path self-test;
4. the stale registration of the 2009 OpenFabrics thread, with really pinned
   pages (needs Linux io_uring; skipped with the reason otherwise).

Prints one table; exits 0 when every row shows what it should
(``reproduced`` for a reproduction, ``prevented`` for pmca's design, or
``skipped`` where this machine cannot run it; a reproduction that does not
reproduce is ``failed``)::

    python examples/seed_scenarios.py            # about a minute
    python examples/seed_scenarios.py --quick    # without the slow reproductions
"""

from __future__ import annotations

import argparse
import sys

from pmca.scenarios import (
    ScenarioResult,
    activation,
    format_table,
    madvise_deadlock,
    ompi_13021,
    stale_registration,
)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="skip the slow reproductions")
    quick = parser.parse_args().quick

    results: list[ScenarioResult] = []
    if quick:
        results.append(ScenarioResult("ompi-13021", "all variants", "skipped", "--quick"))
    else:
        results += ompi_13021.run_matrix()
    results += madvise_deadlock.run(reproduce=not quick, runs=1 if quick else 3)
    results += activation.run()
    results += stale_registration.run(threaded=not quick)
    print(format_table(results))
    ok = all(result.ok for result in results)
    print("seed scenarios:", "OK" if ok else "FAILED")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
