"""What one write system call of a connection takes from its queue."""

from __future__ import annotations

#: Most buffers one ``sendmsg`` takes (the kernel's ``IOV_MAX`` is 1024).
_IOV_MAX = 512


def _first_bytes(buffers: list[memoryview], limit: int) -> list[memoryview]:
    """The leading buffers (at most ``_IOV_MAX``) cut to ``limit`` bytes in all (0: no cut).

    A remainder under a quarter of ``limit`` goes along rather than costing a
    system call (and a wake-up of the reader) of its own.
    """
    head = buffers[:_IOV_MAX]
    if not limit:
        return head
    slack = limit >> 2
    taken: list[memoryview] = []
    for buffer in head:
        if buffer.nbytes > limit + slack:
            taken.append(buffer[:limit])
            break
        taken.append(buffer)
        limit -= buffer.nbytes
        if limit <= 0:
            break
    return taken


__all__ = ["_IOV_MAX", "_first_bytes"]
