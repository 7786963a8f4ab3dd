"""Whether libfabric's own MR cache can be driven for host memory here, and if not, why.

The reproduction is a model (``ompi_ofi.c``) because, in libfabric 2.5.1,
the MR cache (``ofi_mr_cache_*`` in ``prov/util/src/util_mr_cache.c``) is
internal: the library exports only its ``fi_*`` entry points, and the only
public door to the cache, ``fi_open(..., "mr_cache")``, returns a fid whose
one operation is ``bind`` (importing a memory monitor).  The providers that
register host memory through the cache are hardware ones -- verbs, efa,
cxi, opx, lpp -- and shm/sm2 open theirs only for GPU IPC handles
(``ofi_ipc_cache_open``: CUDA, ROCr, Level Zero monitors, none for system
memory).  tcp, udp, sockets and the rxm/rxd utility providers never use it.

``python -m pmca_madvise_deadlock.real_cache`` prints the facts of this
machine as one JSON line: the library, the cache symbols it exports, the
providers ``fi_getinfo`` offers with ``FI_MR_CACHE_MONITOR=memhooks``, and
which of them would use the cache.
"""

from __future__ import annotations

import ctypes
import json
import os
import subprocess
import sys
from typing import Any

__all__ = ["CACHE_PROVIDERS", "CACHE_SYMBOLS", "facts", "probe"]

#: libfabric 2.5.1 providers whose memory registration goes through ofi_mr_cache.
CACHE_PROVIDERS = ("verbs", "efa", "cxi", "opx", "lpp")
#: The cache's own entry points (util_mr_cache.c), if the library exported them.
CACHE_SYMBOLS = ("ofi_mr_cache_init", "ofi_mr_cache_search", "ofi_mr_cache_delete")


def probe() -> dict[str, Any]:
    """The facts, read in this process (which loads libfabric: run it in a child)."""
    os.environ["FI_MR_CACHE_MONITOR"] = "memhooks"
    from pmca.btl.ofi._fabric import ProviderList, load

    fi = load()
    library = ctypes.CDLL(str(fi.path))
    exported = [name for name in CACHE_SYMBOLS if hasattr(library, name)]
    providers = ProviderList(fi, fi.ffi.NULL).names
    usable = [name for name in providers if name.split(";")[0] in CACHE_PROVIDERS]
    reason = None
    if not exported and not usable:
        reason = (
            f"libfabric {'.'.join(map(str, fi.version))} ({fi.path}) exports none of "
            f"{', '.join(CACHE_SYMBOLS)}, and fi_getinfo offers "
            f"{', '.join(providers) or 'nothing'}: "
            f"none of the providers that register host memory through its MR cache "
            f"({', '.join(CACHE_PROVIDERS)})"
        )
    return {
        "library": str(fi.path),
        "version": list(fi.version),
        "exported": exported,
        "providers": providers,
        "cache_providers": usable,
        "unavailable": reason,
    }


def facts(timeout: float = 60.0) -> dict[str, Any]:
    """:func:`probe` in a fresh interpreter (libfabric stays out of this process)."""
    done = subprocess.run(
        [sys.executable, "-m", "pmca_madvise_deadlock.real_cache"],
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )
    lines = [line for line in done.stdout.splitlines() if line.startswith("{")]
    if done.returncode != 0 or not lines:
        last = done.stderr.strip().splitlines()[-1:] or ["no output"]
        return {"unavailable": f"libfabric could not be probed: {last[0]}", "probed": False}
    return dict(json.loads(lines[-1])) | {"probed": True}


if __name__ == "__main__":
    print(json.dumps(probe()), flush=True)
