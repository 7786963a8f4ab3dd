"""A wait's polling phase in C, without the GIL (``libpmca_bml_spin.so``).

A blocking p2p call polls its btls for a while before it sleeps. Polled
from Python, each poll is a short system call that releases the GIL and
takes it back at once: another thread of the process that wants the GIL
(a tool reading pvars every millisecond) is woken at every poll to find it
taken again, and gets it only by luck or after a forced switch, while its
futile wake-ups take the processor from the ranks. When every module
says which descriptors bring it input (:meth:`spin_fds`, tcp's sockets),
the wait instead polls them in C for a short slice with the GIL released
throughout: the other thread takes the GIL once, at once, and the wait
wants it back only when input came or the slice ended. The spin says which
descriptors it found ready (:meth:`Spinner.ready`): the progress call that
follows reads those connections without polling them again.

The same library moves a bulk body between a socket and memory as the peer
makes way (:meth:`Spinner.stream`): one call without the GIL per piece of a
large message instead of a Python round per read or write.
"""

from __future__ import annotations

import ctypes
import os
from collections.abc import Sequence

__all__ = ["LIBRARY_NAME", "SLICE", "Spinner", "library_path", "spinner"]

LIBRARY_NAME = "libpmca_bml_spin.so"
#: Longest native poll in one go: what a wait may be late for a request
#: another thread of the process completed meanwhile.
SLICE = 50e-6
_ABI = 3


def library_path() -> str:
    """Where the library is installed: next to this module."""
    return os.path.join(os.path.dirname(__file__), LIBRARY_NAME)


class Spinner:
    """Polls descriptors in C until one has input or a slice of time passes.

    :meth:`ready` says which ones had input, :meth:`spin` only whether one had.
    """

    def __init__(self, lib: ctypes.CDLL) -> None:
        # CFUNCTYPE: ctypes releases the GIL for the whole call.
        prototype = ctypes.CFUNCTYPE(
            ctypes.c_int64, ctypes.c_void_p, ctypes.c_uint32, ctypes.c_int64, ctypes.c_int
        )
        self._lib = lib
        self._spin = prototype(("pmca_bml_spin", lib))
        streaming = ctypes.CFUNCTYPE(
            ctypes.c_int64,
            ctypes.c_int,
            ctypes.c_void_p,
            ctypes.c_uint64,
            ctypes.c_int,
            ctypes.c_int64,
            ctypes.c_int64,
            ctypes.c_int,
        )
        self._stream = streaming(("pmca_bml_stream", lib))
        #: The last descriptors polled and their C array, swapped as one tuple:
        #: waits on several threads may share this spinner.
        self._last: tuple[tuple[int, ...], ctypes.Array[ctypes.c_int]] = ((), (ctypes.c_int * 0)())

    def ready(self, fds: Sequence[int], seconds: float, give_way: bool) -> list[int] | None:
        """Poll ``fds`` until one has input (or an error, or a hang-up) or ``seconds``
        pass, yielding the processor between polls when ``give_way``.

        The descriptors found ready (``[]``: the time was up), or ``None`` when
        the poll cannot say which (it failed, a signal came, or a ready one is
        beyond the 62nd): the caller then looks for itself.
        """
        key = tuple(fds)
        last = self._last
        if key != last[0]:  # the same descriptors wait after wait: built once
            last = (key, (ctypes.c_int * len(key))(*key))
            self._last = last
        mask: int = self._spin(last[1], len(key), int(seconds * 1e9), int(give_way))
        if mask <= 0:
            return None if mask else []
        if not mask & (mask - 1):  # the usual answer: one descriptor
            return [key[mask.bit_length() - 1]]
        return [fd for index, fd in enumerate(key) if mask >> index & 1]

    def stream(
        self,
        fd: int,
        address: int,
        length: int,
        write: bool,
        idle: float,
        most: float,
        give_way: bool,
    ) -> int:
        """Read socket ``fd`` into the ``length`` bytes at ``address`` as data comes
        (or write them to it, ``write``, as room comes), until they are all moved,
        ``idle`` seconds pass with nothing moved or ``most`` in all (yielding the
        processor between empty tries when ``give_way``).

        The bytes moved (0: none in time); when none were: ``-ECONNRESET`` for a
        peer that closed (reading), ``-errno`` for a failed call.
        """
        return int(
            self._stream(
                fd, address, length, int(write), int(idle * 1e9), int(most * 1e9), int(give_way)
            )
        )

    def another(self) -> Spinner:
        """A spinner of the same library with descriptors of its own: a caller
        polling another set than the waits do keeps its array built once too."""
        return Spinner(self._lib)

    def spin(self, fds: Sequence[int], seconds: float, give_way: bool) -> bool:
        """As :meth:`ready`: ``True`` when a descriptor had input (or the poll cannot
        say which), ``False`` when the time was up."""
        return self.ready(fds, seconds, give_way) != []


_loaded: list[Spinner | None] = []


def spinner() -> Spinner | None:
    """The process's :class:`Spinner`, or ``None`` when the library is not built here,
    cannot be loaded or is of another build (waits then poll from Python, as they
    always may)."""
    if not _loaded:
        path = library_path()
        found: Spinner | None = None
        if os.path.exists(path):
            try:
                lib = ctypes.CDLL(path)
                abi = ctypes.CFUNCTYPE(ctypes.c_uint)(("pmca_bml_spin_abi", lib))
            except (OSError, AttributeError):  # not a library, or without that symbol
                pass
            else:
                if abi() == _ABI:
                    found = Spinner(lib)
        _loaded.append(found)
    return _loaded[0]
