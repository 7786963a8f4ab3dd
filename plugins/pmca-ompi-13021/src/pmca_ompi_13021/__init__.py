"""pmca-ompi-13021: Open MPI 5.0.6's memory/patcher, to reproduce open-mpi/ompi#13021.

Select it with ``PMCA_MCA_memory=ompi13021`` and run two sessions one after
the other (``sessions_init_twice``): with ``PMCA_MCA_mca_base_component_dso=all``
the second finalize dies of SIGSEGV in ``opal_patcher_base_restore_all``;
statically, the second session silently runs without memory hooks while
claiming FREE|MUNMAP. pmca's own ``memory/patcher`` is the fixed version.
See :mod:`pmca_ompi_13021.memory_patcher` for the mapping onto pmca.
"""

from __future__ import annotations

from .memory_patcher import OWNER, SYMBOLS, Ompi13021Memory, Ompi13021MemoryComponent

__all__ = ["OWNER", "SYMBOLS", "Ompi13021Memory", "Ompi13021MemoryComponent"]
