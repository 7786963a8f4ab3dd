"""A rail's listening socket, and its listener during init: every connection handled
at once, none trusted.

A rank listens on each chosen address (never a wildcard), so anything that
reaches the port may connect, not only ranks of the job. Until its hello
proves an expected rank (:func:`pmca.btl.tcp._wire.refusal`), a connection
is *half-open*; the listener reads every half-open connection as its bytes
come (one poll over all of them), so a stranger that sends nothing, or part
of a hello, delays no rank:

- a hello must arrive whole within ``btl_tcp_hello_timeout`` seconds of the
  accept, else the connection is dropped;
- at most ``btl_tcp_half_open_max`` connections per listener are half-open:
  at the cap the oldest is dropped (a rank sends its hello right after
  connecting, so the oldest is the least likely to be one);
- a descriptor limit reached while strangers hold descriptors drops the
  oldest of them and accepts again; reached with none held, it is a
  :class:`~pmca.btl.BtlError` naming the limit (see ``_exhaustion``).

Dropped and refused connections are logged at verbosity 40, once per
source address and reason; the rest are counted in one closing line.
"""

from __future__ import annotations

import errno
import math
import select
import socket
import time
from collections import deque
from collections.abc import Callable
from typing import TYPE_CHECKING

from attrs import define, field, frozen

from ..._records import FrozenValue, Record
from .._interface import BtlError
from . import _wire as wire
from ._exhaustion import EXHAUSTED, socket_error
from ._interfaces import Interface
from ._rails import Pairing

if TYPE_CHECKING:
    from structlog.typing import FilteringBoundLogger

#: accept() errors about one connection that went away before it was taken.
_GONE = frozenset({errno.ECONNABORTED, errno.EPROTO, errno.EPERM, errno.ENETDOWN})


@frozen(eq=False, repr=False)
class HelloRules(FrozenValue):
    """How long a hello may take and how many connections may wait for theirs."""

    #: Seconds from the accept to the whole hello (``btl_tcp_hello_timeout``).
    timeout: float = 1.0
    #: Connections per listener without their hello yet (``btl_tcp_half_open_max``).
    half_open_max: int = 64


@define(eq=False, repr=False)
class _HalfOpen(Record):
    sock: socket.socket
    source: str
    due: float
    hello: bytearray = field(factory=bytearray)


class _Strangers:
    """Dropped and refused connections: the first per source and reason logged."""

    def __init__(self, log: FilteringBoundLogger, interface: Interface) -> None:
        self.log = log
        self.interface = interface
        self.counts: dict[tuple[str, str], int] = {}

    @property
    def total(self) -> int:
        return sum(self.counts.values())

    def note(self, event: str, source: str, reason: str, why: str, **fields: object) -> None:
        """Log ``event`` the first time ``source`` gets it for ``reason``; count it."""
        key = (source, reason)
        self.counts[key] = self.counts.get(key, 0) + 1
        if self.counts[key] == 1:
            self.log.info(event, why=why, source=source, interface=self.interface.name, **fields)

    def summary(self) -> None:
        repeated = {
            f"{source}: {reason}": n - 1 for (source, reason), n in self.counts.items() if n > 1
        }
        if repeated:
            self.log.info("more connections dropped, not logged one by one", counts=repeated)


_DROPPED = "dropped a connection before its hello"
_REFUSED = (
    "refused a connection: its handshake does not prove a rank of this job expected on "
    "this interface"
)


class _Listening:
    """One listener's half-open connections, read together by one poll."""

    def __init__(
        self,
        listener: socket.socket,
        interface: Interface,
        me: int,
        rules: HelloRules,
        log: FilteringBoundLogger,
    ) -> None:
        self.listener = listener
        self.interface = interface
        self.me = me
        self.rules = rules
        self.strangers = _Strangers(log, interface)
        #: By descriptor, oldest first.
        self.half_open: dict[int, _HalfOpen] = {}
        self.poller = select.poll()
        self.poller.register(listener.fileno(), select.POLLIN)

    def wait(self, until: float) -> list[int]:
        """Descriptors with something to read, waiting until ``until`` at most (or
        until the first hello is due)."""
        due = min([until, *(half.due for half in self.half_open.values())])
        milliseconds = max(0, math.ceil((due - time.monotonic()) * 1000))
        return [fd for fd, _ in self.poller.poll(milliseconds)]

    def expire(self, now: float) -> None:
        for half in [h for h in self.half_open.values() if h.due <= now]:
            self.drop(
                half,
                "btl_tcp_hello_timeout",
                f"no whole hello within {self.rules.timeout:g} s (btl_tcp_hello_timeout): "
                f"{len(half.hello)} of {wire.HELLO.size} bytes",
            )

    def drop(self, half: _HalfOpen, reason: str, why: str) -> None:
        """Close ``half`` and note it, once per source and ``reason`` in the log."""
        fd = half.sock.fileno()
        if self.half_open.pop(fd, None) is not None:
            self.poller.unregister(fd)
        half.sock.close()
        self.strangers.note(_DROPPED, half.source, reason, why)

    def read(self, half: _HalfOpen) -> bool:
        """Read what ``half`` sent of its hello; whether the hello is whole (only the
        hello: what a rank sends after it belongs to the connection)."""
        try:
            chunk = half.sock.recv(wire.HELLO.size - len(half.hello))
        except BlockingIOError:
            return False
        except OSError as exc:
            self.drop(half, "failed", f"failed before its hello was whole: {exc}")
            return False
        if not chunk:
            self.drop(
                half,
                "closed",
                f"closed after {len(half.hello)} of the hello's {wire.HELLO.size} bytes",
            )
            return False
        half.hello += chunk
        return len(half.hello) == wire.HELLO.size

    def ready(self, fd: int) -> _HalfOpen | None:
        """The half-open connection on ``fd`` if its hello is now whole."""
        half = self.half_open.get(fd)
        if half is None or not self.read(half):
            return None
        del self.half_open[fd]
        self.poller.unregister(fd)
        return half

    def accept_waiting(self, waiting_for: str, whole: deque[_HalfOpen]) -> None:
        """Accept what the kernel has queued (a bounded number per call); add those
        whose hello came with them to ``whole``, and keep the others half-open."""
        accepted = 0
        for _ in range(self.rules.half_open_max + 1):
            try:
                sock, peer = self.listener.accept()
            except BlockingIOError:
                break
            except OSError as exc:
                if exc.errno in EXHAUSTED and accepted:
                    # Linux takes the descriptor before it looks for a connection:
                    # this says nothing about one waiting. The next poll does.
                    break
                if exc.errno in EXHAUSTED and self.half_open:
                    oldest = next(iter(self.half_open.values()))
                    self.drop(oldest, "descriptors", f"its descriptor is needed: {exc}")
                    continue
                if exc.errno in _GONE:
                    continue
                raise self._accept_error(exc, waiting_for) from None
            accepted += 1
            half = _HalfOpen(sock, str(peer[0]), time.monotonic() + self.rules.timeout)
            sock.setblocking(False)
            if self.read(half):
                whole.append(half)  # the usual case: a rank's hello follows its connect
                continue
            if sock.fileno() < 0:
                continue  # dropped by read
            if len(self.half_open) >= self.rules.half_open_max:
                oldest = next(iter(self.half_open.values()))
                self.drop(
                    oldest,
                    "btl_tcp_half_open_max",
                    f"{self.rules.half_open_max} connections were already waiting for their "
                    "hello (btl_tcp_half_open_max): the oldest is dropped",
                )
            self.half_open[sock.fileno()] = half
            self.poller.register(sock.fileno(), select.POLLIN)

    def _accept_error(self, exc: OSError, waiting_for: str) -> BtlError:
        address, port = self.listener.getsockname()[:2]
        doing = (
            f"btl tcp: rank {self.me} cannot accept a connection on {self.interface.name} "
            f"{address} port {port} (waiting for {waiting_for})"
        )
        return socket_error(exc, doing)

    def close(self) -> None:
        for half in list(self.half_open.values()):
            self.poller.unregister(half.sock.fileno())
            half.sock.close()
        self.half_open.clear()
        self.strangers.summary()


def accept(
    listener: socket.socket,
    interface: Interface,
    me: int,
    nonce: bytes,
    expected: dict[int, Pairing],
    adopt: Callable[[int, socket.socket], None],
    deadline: float,
    timeout: float,
    log: FilteringBoundLogger,
    rules: HelloRules | None = None,
) -> None:
    """Hand each expected rank's accepted socket to ``adopt``, until ``expected`` is
    empty.

    Ranks are removed from ``expected`` as they are accepted; a connection
    whose hello does not prove an expected rank of this job is refused, one
    whose hello does not come in time dropped. Connections still without a
    hello when every expected rank is in are closed. When anything raises
    (``adopt`` included), every connection not adopted yet is closed before the
    error propagates: the one ``adopt`` failed on, and the rest of its batch.
    """
    listening = _Listening(listener, interface, me, rules or HelloRules(), log)
    listener.setblocking(False)
    #: Connections with their whole hello, not adopted yet, oldest first.
    whole: deque[_HalfOpen] = deque()
    try:
        while expected:
            now = time.monotonic()
            listening.expire(now)
            if now >= deadline:
                raise BtlError(_never_contacted(me, expected, interface, timeout, listening))
            for fd in listening.wait(deadline):
                if fd == listener.fileno():
                    listening.accept_waiting(_ranks(expected), whole)
                else:
                    half = listening.ready(fd)
                    if half is not None:
                        whole.append(half)
            while whole:
                half = whole[0]
                rank = _proven(half, nonce, expected, listening)
                if rank is not None:
                    adopt(rank, half.sock)
                whole.popleft()
    finally:
        for half in whole:
            half.sock.close()
        listening.close()


def _proven(
    half: _HalfOpen, nonce: bytes, expected: dict[int, Pairing], listening: _Listening
) -> int | None:
    """The expected rank ``half``'s whole hello proves (taken out of ``expected``), or
    None after refusing the connection."""
    magic, rank, their_nonce = wire.HELLO.unpack(bytes(half.hello))
    why = wire.refusal(magic, their_nonce, rank, nonce, expected)
    if why:
        half.sock.close()
        listening.strangers.note(_REFUSED, half.source, why, why, rank=rank)
        return None
    advertised = expected.pop(rank).remote.address
    if half.source != advertised:
        # Routing picked another source address; the nonce of this process's
        # modex entry, which only the job's ranks received, proves who it is.
        listening.strangers.log.info(
            "accepted a connection from an address the peer did not advertise",
            rank=rank,
            source=half.source,
            advertised=advertised,
        )
    return int(rank)


def _ranks(expected: dict[int, Pairing]) -> str:
    """``rank 3`` or ``ranks 3, 5``."""
    ranks = sorted(expected)
    return f"rank {ranks[0]}" if len(ranks) == 1 else f"ranks {', '.join(map(str, ranks))}"


def _never_contacted(
    me: int,
    expected: dict[int, Pairing],
    interface: Interface,
    timeout: float,
    listening: _Listening,
) -> str:
    dropped = listening.strangers.total + len(listening.half_open)
    strangers = (
        f"; {dropped} other connection(s) proved no rank (btl_base_verbose 40 shows them)"
        if dropped
        else ""
    )
    return (
        f"btl tcp: rank {me} was never contacted by rank(s) "
        f"{', '.join(map(str, sorted(expected)))} on {interface.name} within "
        f"{timeout:g} s (pmca_base_modex_timeout){strangers}"
    )


def listen(interface: Interface) -> socket.socket:
    """A socket listening on ``interface``'s own address: only that address (IPv4 or
    IPv6), never the wildcard, so an interface left out takes no connection."""
    doing = f"btl tcp: cannot listen on {interface.name} {interface.address}"
    try:
        listener = socket.socket(interface.family, socket.SOCK_STREAM)
    except OSError as exc:
        raise socket_error(exc, doing) from None
    try:
        listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        listener.bind((interface.address, 0))
        listener.listen(256)
    except OSError as exc:
        listener.close()
        raise socket_error(exc, doing) from None
    return listener


__all__ = ["HelloRules", "accept", "listen"]
