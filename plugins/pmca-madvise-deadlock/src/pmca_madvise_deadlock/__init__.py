"""A model of Open MPI 5 + libfabric 2.5.1's release path, to reproduce the madvise deadlock.

A model, not the libraries: libfabric 2.5.1 reaches its MR cache only from
hardware providers (verbs, efa, cxi, opx, lpp) and, in shm and sm2, for GPU
IPC handles; its cache functions are not exported.  :func:`real_cache_path`
says why, on this machine, from the library itself.

open-mpi/ompi#13149 and ofiwg/libfabric#10879: libfabric's MR cache inserts
into its tree with ``mm_lock`` held and the insert may ``malloc``; under
mimalloc that ``malloc`` can return memory with ``madvise``; Open MPI's
patched ``madvise`` calls libfabric's monitor callback right there, which
takes ``mm_lock``: the thread waits for itself.  See ``ompi_ofi.c``.

The same native workload (``workload.c``) runs over two designs:

- ``ompi``: this distribution's native library (patched libc, callbacks
  inside the hook, the 2.5.1 cache);
- ``pmca``: the same model cache and workload, with pmca's hooks (which
  only publish to a lock-free ring) as the cache's memory monitor: a native
  thread drains the ring into the cache's notify (``pmca_monitor.c``);
- ``grdma``: a pmca session and pmca's rcache/grdma (a different cache,
  reached through Python callbacks: far slower, kept for comparison).

Run one child with ``python -m pmca_madvise_deadlock DESIGN SECONDS``
(under mimalloc: see :func:`child_environment`).
"""

from __future__ import annotations

import ctypes
import json
import os
import threading
from pathlib import Path
from typing import Any

__all__ = [
    "DesignStruct",
    "PmcaDesign",
    "check_allocator",
    "child_environment",
    "child_main",
    "library_path",
    "mimalloc_path",
    "ompi_design",
]

LIBRARY_NAME = "libpmca_madvise_deadlock.so"


def library_path() -> Path:
    return Path(__file__).with_name(LIBRARY_NAME)


def mimalloc_path() -> Path | None:
    """libmimalloc.so among the files the ``cmeel-mimalloc`` distribution installed, if any.

    Found through the distribution's own file list, not ``cmeel``: that
    package's ``.pth`` file would run (and import ``pathlib``) at every
    interpreter start of the environment, so the project installs
    ``cmeel-mimalloc`` without it (``pip install --no-deps``).
    """
    from importlib import metadata

    try:
        files = metadata.files("cmeel-mimalloc") or []
    except metadata.PackageNotFoundError:
        return None
    for file in files:
        if file.name == "libmimalloc.so" and file.parent.name == "lib":
            candidate = Path(str(file.locate()))
            if candidate.exists():
                return candidate
    return None


def child_environment() -> dict[str, str]:
    """Preload mimalloc and make it purge soon, from inside ``malloc``.

    ``PURGE_DELAY=1``: memory given back to an arena is purged (``madvise``)
    1 ms later by the next arena collection, and mimalloc 3.x collects when a
    page is abandoned or freed -- which a ``malloc`` whose page ran out does
    while it searches its size class for another.  ``PAGE_FULL_RETAIN=0``
    (default 2): every full page that search meets is abandoned at once
    instead of being kept in the queue, so nearly every ``malloc`` that
    leaves the fast path, the cache's node allocation included, runs an
    arena collection and, once 1 ms has passed, the ``madvise``.
    """
    if os.environ.get("PMCA_REPRO_ALLOCATOR") == "glibc":
        return {"PMCA_REPRO_ALLOCATOR": "glibc"}
    mimalloc = mimalloc_path()
    if mimalloc is None:
        raise FileNotFoundError("libmimalloc.so not found: pip install cmeel-mimalloc")
    return {
        "PMCA_REPRO_ALLOCATOR": "mimalloc",
        "LD_PRELOAD": str(mimalloc),
        "MIMALLOC_PURGE_DELAY": os.environ.get("PMCA_REPRO_PURGE_DELAY", "1"),
        "MIMALLOC_PAGE_FULL_RETAIN": os.environ.get("PMCA_REPRO_PAGE_RETAIN", "0"),
    }


_OPEN = ctypes.CFUNCTYPE(ctypes.c_void_p)
_REG = ctypes.CFUNCTYPE(ctypes.c_void_p, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_size_t)
_DEREG = ctypes.CFUNCTYPE(None, ctypes.c_void_p, ctypes.c_void_p)
_CLOSE = ctypes.CFUNCTYPE(None, ctypes.c_void_p)


class DesignStruct(ctypes.Structure):
    """``struct design`` of workload.c: the cache operations the workload calls."""

    _fields_ = (("open", _OPEN), ("reg", _REG), ("dereg", _DEREG), ("close", _CLOSE))


def _library() -> ctypes.CDLL:
    lib = ctypes.CDLL(str(library_path()))
    lib.repro_install_hooks.restype = ctypes.c_int
    lib.repro_mm_lock_address.restype = ctypes.c_void_p
    lib.repro_workload.argtypes = [ctypes.POINTER(DesignStruct), ctypes.c_int, ctypes.c_double]
    lib.repro_workload.restype = ctypes.c_long
    return lib


def ompi_design(lib: ctypes.CDLL) -> DesignStruct:
    """Open MPI + libfabric 2.5.1: native functions all the way (ompi_ofi.c)."""

    def native(name: str, kind: Any) -> Any:
        return ctypes.cast(getattr(lib, name), kind)

    return DesignStruct(
        native("repro_cache_open", _OPEN),
        native("repro_register", _REG),
        native("repro_deregister", _DEREG),
        native("repro_cache_close", _CLOSE),
    )


class PmcaDesign:
    """pmca: ring-only hooks, pmca's rcache/grdma (reached from the native workload)."""

    def __init__(self) -> None:
        import pmca

        self._pmca = pmca
        self._lock = threading.Lock()
        self._objects: dict[int, Any] = {}
        self._next = 1
        #: Whether every cache heard release events (pmca's hooks were in place).
        self.coherent = True
        self.struct = DesignStruct(
            _OPEN(self._open), _REG(self._reg), _DEREG(self._dereg), _CLOSE(self._close)
        )

    def _keep(self, obj: Any) -> int:
        with self._lock:
            key = self._next
            self._next += 1
            self._objects[key] = obj
        return key

    def _open(self) -> int:
        cache = self._pmca.rcache.create("grdma", self._pmca.rcache.UnpinnedBackend())
        self.coherent = self.coherent and cache.coherent
        return self._keep(cache)

    def _reg(self, cache: int, address: int, length: int) -> int:
        return self._keep(self._objects[cache].register(address, length))

    def _dereg(self, cache: int, registration: int) -> None:
        with self._lock:
            reg = self._objects.pop(registration)
        self._objects[cache].deregister(reg)

    def _close(self, cache: int) -> None:
        with self._lock:
            rc = self._objects.pop(cache)
        rc.close()


def malloc_provider() -> str:
    """The file that defines the ``malloc`` this process calls (``dladdr`` of its symbol)."""

    class _DlInfo(ctypes.Structure):
        _fields_ = (
            ("dli_fname", ctypes.c_char_p),
            ("dli_fbase", ctypes.c_void_p),
            ("dli_sname", ctypes.c_char_p),
            ("dli_saddr", ctypes.c_void_p),
        )

    libc = ctypes.CDLL(None)
    info = _DlInfo()
    address = ctypes.cast(libc.malloc, ctypes.c_void_p)
    if not libc.dladdr(address, ctypes.byref(info)) or info.dli_fname is None:
        return "<unknown>"
    return os.path.realpath(info.dli_fname.decode())


def mapped_mimalloc() -> list[str]:
    """The mimalloc libraries mapped into this process (``/proc/self/maps``)."""
    with open("/proc/self/maps", encoding="ascii", errors="replace") as maps:
        paths = {line.split(None, 5)[-1].strip() for line in maps if "mimalloc" in line}
    return sorted(paths)


def check_allocator() -> dict[str, Any]:
    """Which allocator this child runs on; raise unless it is the one asked for.

    ``PMCA_REPRO_ALLOCATOR=glibc`` runs without mimalloc (glibc's own cycle);
    otherwise mimalloc must be mapped and be what ``malloc`` resolves to: a
    preload that silently did not take would make every run measure glibc.
    """
    wanted = os.environ.get("PMCA_REPRO_ALLOCATOR", "mimalloc")
    provider, mapped = malloc_provider(), mapped_mimalloc()
    on_mimalloc = bool(mapped) and "mimalloc" in Path(provider).name
    if (wanted == "mimalloc") != on_mimalloc:
        raise RuntimeError(
            f"allocator: asked for {wanted}, but malloc comes from {provider} "
            f"(mimalloc mapped: {mapped or 'no'})"
        )
    return {"allocator": wanted, "malloc_from": provider}


def _print(payload: dict[str, Any]) -> None:
    print(json.dumps(payload), flush=True)


def child_main(design: str, seconds: float, threads: int = 4) -> None:
    """One run: announce what the watchdog needs, run the workload, report."""
    _print({"pid": os.getpid(), "design": design})
    _print(check_allocator())
    lib = _library()
    if design == "ompi":
        rc = lib.repro_install_hooks()
        if rc != 0:
            raise OSError(-rc, f"patching libc's madvise/munmap failed: {os.strerror(-rc)}")
        lib.repro_import_monitor()
        _print({"mm_lock": int(lib.repro_mm_lock_address())})
        phases = lib.repro_workload(ctypes.byref(ompi_design(lib)), threads, seconds)
        lib.repro_hook_calls.restype = ctypes.c_long
        _print({"hook_calls": int(lib.repro_hook_calls())})
    elif design == "pmca":
        phases = _pmca_monitor_run(lib, threads, seconds)
    else:  # "grdma": pmca's own cache, reached through Python callbacks
        import pmca

        with pmca.Session():
            chosen = PmcaDesign()
            phases = lib.repro_workload(ctypes.byref(chosen.struct), threads, seconds)
        _print({"coherent": chosen.coherent})
    _print({"completed": True, "phases": int(phases)})


#: The release calls the model's Open MPI hooks intercept: pmca's hooks take them instead.
MONITORED = ("munmap", "madvise")


def _pmca_monitor_run(lib: ctypes.CDLL, threads: int, seconds: float) -> int:
    """The model cache and workload, with pmca's hooks as the cache's memory monitor.

    pmca's patches on ``munmap``/``madvise`` publish to its ring; a native
    thread of this library drains the ring and calls the model's monitor
    notify (``pmca_monitor.c``).  No Python runs on that path.
    """
    from pmca import native
    from pmca.native._abi import load as load_hooks_library

    hooks = native.backend()
    hooks.ensure_ring()
    sites = [hooks.install(symbol) for symbol in MONITORED]
    try:
        hooked = all(hooks.is_installed(symbol) for symbol in MONITORED)
        raw = load_hooks_library()  # libpmca_hooks.so: its drain and wait, by address
        drain = ctypes.cast(raw.pmca_hooks_drain, ctypes.c_void_p)
        wait = ctypes.cast(raw.pmca_hooks_wait, ctypes.c_void_p)
        lib.repro_pmca_monitor_start.argtypes = [ctypes.c_void_p, ctypes.c_void_p]
        rc = lib.repro_pmca_monitor_start(drain, wait)
        if rc != 0:
            raise OSError(rc, f"starting the monitor thread failed: {os.strerror(rc)}")
        _print({"mm_lock": int(lib.repro_mm_lock_address())})
        phases = int(lib.repro_workload(ctypes.byref(ompi_design(lib)), threads, seconds))
        flushes = ctypes.c_long(0)
        lib.repro_pmca_monitor_stop.restype = ctypes.c_long
        events = int(lib.repro_pmca_monitor_stop(ctypes.byref(flushes)))
    finally:
        for site in sites:
            hooks.restore(site)
    # Coherent: pmca's hooks were in place and their events reached the cache.
    _print({"coherent": hooked and events > 0, "monitor_events": events})
    _print({"monitor_flushes": int(flushes.value)})
    return phases
