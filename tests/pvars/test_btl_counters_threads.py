"""btl counters of third-party subclasses and of sends from several threads: each message once.

A third-party module's ``send``/``sendi`` are wrapped to count (it does not
count its own); a subclass of it whose ``send`` calls ``super().send`` was
counted twice, once per wrapper. And two threads sending on one module
without a lock of their own lost part of the counts: the wrapper added
``sum(...)`` of the parts in place, and the interpreter may switch threads
at that call, between the addition's read and its write.
"""

from __future__ import annotations

import sys
import threading
from collections.abc import Iterator
from typing import Any

import pytest
import structlog

import pmca
from pmca.btl import Flags, Limits
from pmca.btl.base import ModuleBase

_LIMITS = Limits(1, 1, 1, 1024, 0, 1024, Flags(0))


class _Transport(ModuleBase):
    """A third-party module that counts nothing itself."""

    def sendi(self, endpoint: Any, tag: int, parts: Any) -> bool:
        return tag != 9  # refuses tag 9: not counted

    def send(self, endpoint: Any, tag: int, parts: Any, callback: Any = None) -> None:
        return None


class _Traced(_Transport):
    """A subclass adding to its base's sends (what a tracing or throttling layer does)."""

    def sendi(self, endpoint: Any, tag: int, parts: Any) -> bool:
        return super().sendi(endpoint, tag, parts)

    def send(self, endpoint: Any, tag: int, parts: Any, callback: Any = None) -> None:
        super().send(endpoint, tag, parts, callback)


class _Quiet(_Traced):
    """Defines no send of its own: its base's outermost one counts."""


class _Peer:
    rank = 3


@pytest.mark.parametrize("cls", [_Transport, _Traced, _Quiet])
def test_a_send_calling_its_bases_send_is_counted_once(cls) -> None:
    module = cls(f"counted{cls.__name__.lower()}", _LIMITS, structlog.get_logger())
    module.send(_Peer(), 1, [b"abc", bytearray(5)])
    assert module.sendi(_Peer(), 1, [b"xy"])
    assert not module.sendi(_Peer(), 9, [b"xy"])
    assert module.counter("messages_sent", 3) == 2
    assert module.counter("bytes_sent", 3) == 10


@pytest.fixture
def switching() -> Iterator[None]:
    """Threads switch as often as the interpreter lets them: a lost count shows."""
    before = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)
    try:
        yield
    finally:
        sys.setswitchinterval(before)


def _from_two_threads(send: Any, count: int) -> None:
    threads = [threading.Thread(target=lambda: [send() for _ in range(count)]) for _ in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=120)


def test_two_threads_sending_on_a_wrapped_module_lose_no_count(switching) -> None:
    module = _Traced("threadedtraced", _LIMITS, structlog.get_logger())
    peer, parts, count = _Peer(), [b"abc", bytearray(5)], 50_000
    _from_two_threads(lambda: module.sendi(peer, 1, parts), count)
    assert module.counter("messages_sent", 3) == 2 * count
    assert module.counter("bytes_sent", 3) == 2 * count * 8


def test_two_threads_sending_on_the_self_module_lose_no_count(pmca_env, switching) -> None:
    """The built-in modules count at their own call sites, the same way. (btl/self
    added ``len(data)`` in place, which loses counts on Python 3.10.)"""
    with pmca.Session(mca={"btl": "self"}, frameworks=["btl"]) as s:
        (route,) = s._data_path().bml.peer(0).routes
        module, endpoint = route.module, route.endpoint
        module.register_recv(200, lambda endpoint, tag, data: None)
        before = {n: module.counter(n, 0) for n in ("messages_sent", "bytes_sent")}
        count, rounds = 50_000, 4
        for _ in range(rounds):  # each round delivered before the next: memory stays small
            _from_two_threads(lambda: module.sendi(endpoint, 200, [b"abcde"]), count)
            module.progress()
        module.unregister_recv(200)
        sent = {n: module.counter(n, 0) - before[n] for n in before}
        assert sent == {"messages_sent": 2 * count * rounds, "bytes_sent": 10 * count * rounds}
