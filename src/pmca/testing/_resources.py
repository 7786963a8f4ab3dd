"""What a process holds, read from ``/proc/self``: for tests that a close gave everything back."""

from __future__ import annotations

import os

from .._public import public


@public
def open_sockets() -> set[str]:
    """The file descriptors of this process that are sockets."""
    found = set()
    for fd in os.listdir("/proc/self/fd"):
        try:
            if os.readlink(f"/proc/self/fd/{fd}").startswith("socket:"):
                found.add(fd)
        except OSError:  # closed while listed (the listing's own descriptor)
            pass
    return found


@public
def mapped_files(containing: str) -> set[str]:
    """Paths mapped into this process whose path contains ``containing``."""
    with open("/proc/self/maps") as maps:
        return {line.split()[-1] for line in maps if containing in line}


__all__ = ["mapped_files", "open_sockets"]
