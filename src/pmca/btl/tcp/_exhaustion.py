"""Errors naming the limit a socket call ran into, instead of a bare ``OSError``.

A rank over tcp holds one descriptor per peer and rail, plus one listener
per rail, so a job of many ranks under a low ``ulimit -n`` runs out of
descriptors in the middle of init: the message says which rank, which peer
and address, which limit (with its soft and hard values) and what to do.
The same for the system's table of open files (``ENFILE``), the kernel's
socket buffer memory (``ENOBUFS``) and memory itself (``ENOMEM``).
"""

from __future__ import annotations

import errno
import os
import resource

from .._interface import BtlError

#: Errors meaning "out of something", not "the peer or the network said no".
EXHAUSTED = frozenset({errno.EMFILE, errno.ENFILE, errno.ENOBUFS, errno.ENOMEM})


def _shown(value: int) -> str:
    return "unlimited" if value == resource.RLIM_INFINITY else str(value)


def _now(path: str) -> str:
    """`` (now <the file's value>)``, or nothing when it cannot be read: when a table
    is full, or memory short, this open may fail too."""
    try:
        with open(path) as f:
            return f" (now {' '.join(f.read().split())})"
    except OSError:
        return ""


def _limit(code: int) -> str:
    """The limit ``code`` means and what raises it."""
    if code == errno.EMFILE:
        soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
        return (
            f"this process reached its limit of open file descriptors, RLIMIT_NOFILE "
            f"(soft {_shown(soft)}, hard {_shown(hard)}); btl tcp holds one descriptor per "
            "peer and rail plus one listener per rail: raise the soft limit (ulimit -n, or "
            "the launcher's setting; at most the hard limit without privileges), use fewer "
            "rails (btl_tcp_if_include), or leave tcp out where every peer is on this host "
            "(btl=self,sm)"
        )
    if code == errno.ENFILE:
        return (
            "the system-wide table of open files is full (the sysctl fs.file-max"
            f"{_now('/proc/sys/fs/file-max')}): close other programs' files or raise "
            "fs.file-max"
        )
    if code == errno.ENOBUFS:
        return (
            "the kernel has no buffer space left for the socket: the memory of all TCP "
            "sockets is bounded by the sysctl net.ipv4.tcp_mem"
            f"{_now('/proc/sys/net/ipv4/tcp_mem')} pages, a socket's option memory by "
            f"net.core.optmem_max{_now('/proc/sys/net/core/optmem_max')} bytes: close other "
            "connections, raise those limits, or run fewer ranks or rails per host"
        )
    return (
        "the kernel could not allocate memory for the socket: this host, or this "
        "process's memory cgroup (memory.max; memory.limit_in_bytes under cgroup v1), "
        "is out of memory: free memory, raise that limit, or run fewer ranks or rails "
        "per host"
    )


def socket_error(exc: OSError, doing: str, hint: str = "") -> BtlError:
    """A :class:`BtlError` saying ``doing`` failed: for want of a resource, naming
    the limit and a remedy; otherwise with ``exc`` and ``hint`` after it."""
    code = exc.errno
    if code not in EXHAUSTED:
        return BtlError(f"{doing}: {exc}{hint}")
    name = errno.errorcode.get(code, str(code))
    return BtlError(f"{doing}: {os.strerror(code)} ({name}): {_limit(code)}")


__all__ = ["EXHAUSTED", "socket_error"]
