"""``python -m pmca_madvise_deadlock {ompi,pmca} SECONDS [THREADS]``: one run of the workload."""

from __future__ import annotations

import sys

from . import child_main

if __name__ == "__main__":
    design, seconds, *rest = sys.argv[1:]
    child_main(design, float(seconds), int(rest[0]) if rest else 4)
