"""The process's own PMIx client: initialized once, finalized at exit.

PMIx counts its initializations, and every PMIx world takes one of its own
(``PMIx_Init`` ... ``PMIx_Finalize``); this client holds one more for the
life of the process, for two reasons. OpenPMIx 5 cannot be initialized
again once its count fell to zero (the second cycle corrupts its heap at
exit), so a program that runs one session after another must never let it
fall there. And a launcher takes a process that exits without
``PMIx_Finalize`` for a failed one: the last reference is dropped at exit.

The client also owns the failure-event plumbing: the registration of pmca's
C handler (``pmix_events.c``, which runs on PMIx's thread and never enters
Python), code by code so that a server refusing one code costs that code
only (what it would have told is lost), one pipe the handler writes records to, and the worlds that
subscribed to what is read from it.
"""

from __future__ import annotations

import atexit
import errno
import os
import threading
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from . import _pmix_cdef as c
from ._interface import LauncherError

if TYPE_CHECKING:
    from ._pmix_library import Library


#: ``subscriber(status, rank, monotonic seconds, namespace)``.
Subscriber = Callable[[int, int, float, str], None]


class Client:
    """One PMIx initialization and the failure events, for the whole process."""

    def __init__(self, library: Library) -> None:
        self.library = library
        ffi, lib, events = library.ffi, library.lib, library.events
        self.proc = ffi.new("pmix_proc_t *")
        status = lib.PMIx_Init(self.proc, ffi.NULL, 0)
        if status != c.PMIX_SUCCESS:
            raise LauncherError(
                f"PMIx: PMIx_Init failed: {library.error(status)} (is this process running "
                f"under a PMIx launcher such as mpirun? PMIX_NAMESPACE="
                f"{os.environ.get('PMIX_NAMESPACE')!r})"
            )
        self.subscribers: list[Subscriber] = []
        #: Modex exchanges made so far by every world of this process.
        self.exchanges = 0
        #: Why the server can no longer be used, once it cannot.
        self.lost: str | None = None
        self.read_fd, self.write_fd = os.pipe2(os.O_NONBLOCK | os.O_CLOEXEC)
        events.pmca_pmix_events_set_fd(self.write_fd)
        #: Event codes the server refused, with its answer (nothing of them arrives).
        self.refused: dict[str, str] = {}
        self.handlers: list[int] = []
        # One registration per code: a server may refuse a single code, and
        # with it a whole call naming several (Slurm 22.05's refuses
        # PMIX_EVENT_NODE_DOWN); and once refused, a server may take the
        # codes of that call as known and never ask its host again.
        for code in [*c.PEER_EVENTS, c.LOST_CONNECTION, c.UNREACH]:
            reference = self._register(code)
            if reference >= 0:
                self.handlers.append(reference)
            else:
                self.refused[c.EVENT_NAMES[code]] = library.error(reference)
        atexit.register(self.finalize)

    def _register(self, code: int) -> int:
        """The reference of pmca's handler registered for ``code``, or PMIx's error."""
        ffi = self.library.ffi
        codes = ffi.new("pmix_status_t[]", [code])
        handler = ffi.cast("void *", self.library.events.pmca_pmix_events_handler)
        # No callback: the registration is blocking and answers the reference.
        return int(
            self.library.lib.PMIx_Register_event_handler(
                codes, 1, ffi.NULL, 0, handler, ffi.NULL, ffi.NULL
            )
        )

    def drain(self) -> None:
        """Hand every record the handler wrote so far to every subscriber."""
        while self.read_fd >= 0:
            try:
                chunk = os.read(self.read_fd, c.RECORD.size * 64)
            except BlockingIOError:
                break
            except OSError as exc:
                if exc.errno == errno.EINTR:
                    continue
                break
            for offset in range(0, len(chunk) - c.RECORD.size + 1, c.RECORD.size):
                status, rank, ns, nspace = c.RECORD.unpack_from(chunk, offset)
                if status in (c.LOST_CONNECTION, c.UNREACH):
                    self.lost = f"lost the connection to the PMIx server ({status})"
                name = nspace.rstrip(b"\0").decode(errors="replace")
                for subscriber in list(self.subscribers):
                    subscriber(status, rank, ns / 1e9, name)
        if self.library.events.pmca_pmix_events_overflowed():
            self.lost = "PMIx events were lost (the notice pipe overflowed)"

    def finalize(self) -> None:
        """Deregister the handler and drop the process's reference (at exit)."""
        if self.read_fd < 0:
            return
        ffi, lib, events = self.library.ffi, self.library.lib, self.library.events
        for reference in getattr(self, "handlers", ()):
            lib.PMIx_Deregister_event_handler(reference, ffi.NULL, ffi.NULL)
        self.handlers = []
        events.pmca_pmix_events_set_fd(-1)
        lib.PMIx_Finalize(ffi.NULL, 0)
        os.close(self.read_fd)
        os.close(self.write_fd)
        self.read_fd = self.write_fd = -1


_clients: dict[int, Client] = {}
_lock = threading.Lock()


def client(library: Library) -> Client:
    """The process's client of ``library``, initialized at the first call."""
    with _lock:
        found = _clients.get(id(library))
        if found is None or found.read_fd < 0:
            found = _clients[id(library)] = Client(library)
        return found


_abandoned: list[Any] = []


def abandon(*keep: Any) -> None:
    """Keep what a timed-out PMIx operation may still write to, for the process's life."""
    _abandoned.append(keep)
