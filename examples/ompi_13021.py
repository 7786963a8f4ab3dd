"""Seed scenario 1, open-mpi/ompi#13021: reproduced by a plugin, prevented by pmca.

Runs ``sessions_init_twice`` once per row, each in a fresh interpreter:
Open MPI 5.0.6's memory/patcher (the ``pmca-ompi-13021`` plugin) and pmca's
own memory/patcher, each with components loaded statically and as DSOs, the
reproduction also without pmca's address quarantine and with its
stale-reference check at its default (error), and prints one row per run.
Exits 0 when every row shows what it should: the reproduction reproduces (or
the stale check detects it), pmca prevents (or a row cannot run here)::

    pip install plugins/pmca-ompi-13021
    python examples/ompi_13021.py
"""

from __future__ import annotations

import sys

from pmca.scenarios import format_table
from pmca.scenarios.ompi_13021 import run_matrix


def main() -> int:
    results = run_matrix()
    print(format_table(results))
    return 0 if all(result.ok for result in results) else 1


if __name__ == "__main__":
    sys.exit(main())
