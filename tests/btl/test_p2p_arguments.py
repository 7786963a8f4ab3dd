"""Every public p2p entry point against a table of hostile ranks, tags and timeouts.

Each bad value gets the same error type and a message naming the argument,
whichever entry point it reached; numpy integers are ranks and tags
everywhere; a timeout is refused before anything waits (NaN and infinity
once waited forever, since no deadline compares with them).
"""

from __future__ import annotations

import math
import threading
from collections.abc import Callable, Iterator
from typing import Any

import pytest

import pmca
from pmca.p2p import ANY_SOURCE, ANY_TAG, Status, wait_all, wait_any

try:
    import numpy
except ImportError:  # pragma: no cover - numpy comes with the mpi extra
    numpy = None

_NEEDS_NUMPY = pytest.mark.skipif(numpy is None, reason="numpy is not installed")
_TAG = 17
_BIG = 2**63


@pytest.fixture(scope="module")
def session() -> Iterator[pmca.Session]:
    with pmca.Session(mca={"btl": "self"}, frameworks=["btl"]) as s:
        yield s


@pytest.fixture
def p2p(session: pmca.Session) -> Iterator[Any]:
    p2p = session.p2p
    yield p2p
    # a refused call left nothing behind: no message, no receive posted
    assert p2p.iprobe(ANY_SOURCE, ANY_TAG) is None
    assert p2p.queue_lengths() == (0, 0)


def _np(name: str, value: int) -> Any:
    return getattr(numpy, name)(value) if numpy is not None else value


# -- ranks and tags -------------------------------------------------------------

#: (entry point, whether it takes the wildcards, a call with (rank, tag)).
_ADDRESSED: dict[str, tuple[bool, Callable[[Any, Any, Any], Any]]] = {
    "send": (False, lambda p, r, t: p.send(r, t, b"x")),
    "isend": (False, lambda p, r, t: p.isend(r, t, b"x")),
    "recv": (True, lambda p, r, t: p.recv(r, t, bytearray(8), timeout=10)),
    "irecv": (True, lambda p, r, t: p.irecv(r, t, bytearray(8))),
    "probe": (True, lambda p, r, t: p.probe(r, t, timeout=10)),
    "iprobe": (True, lambda p, r, t: p.iprobe(r, t)),
    "mprobe": (True, lambda p, r, t: p.mprobe(r, t, timeout=10)),
    "improbe": (True, lambda p, r, t: p.improbe(r, t)),
}
_WHERE = {
    "send": "p2p send",
    "isend": "p2p send",
    "recv": "p2p recv",
    "irecv": "p2p recv",
    "probe": "p2p probe",
    "iprobe": "p2p probe",
    "mprobe": "p2p mprobe",
    "improbe": "p2p mprobe",
}

#: (value, error, message) for a rank or a tag, wherever it goes.
_HOSTILE = [
    (1.0, TypeError, "{what} 1.0 is a float, not an integer"),
    (None, TypeError, "{what} None is a NoneType, not an integer"),
    (True, TypeError, "{what} True is a bool, not an integer"),
    (False, TypeError, "{what} False is a bool, not an integer"),
    ("0", TypeError, "{what} '0' is a str, not an integer"),
    (_BIG, ValueError, "{what} 9223372036854775808 is outside"),
    (-2, ValueError, "{what} -2 is outside"),
]
#: -1 is ANY_SOURCE / ANY_TAG: refused only where a send needs a real peer and tag.
_WILDCARD = (-1, ValueError, "{what} -1 is outside")


def _rows() -> Iterator[Any]:
    for entry, (wildcard, _) in _ADDRESSED.items():
        for value, error, text in _HOSTILE if wildcard else [*_HOSTILE, _WILDCARD]:
            yield pytest.param(entry, value, error, text, id=f"{entry}-{value!r}")


@pytest.mark.parametrize(("entry", "value", "error", "text"), list(_rows()))
@pytest.mark.parametrize("what", ["rank", "tag"])
def test_a_hostile_rank_or_tag_is_refused_naming_it(p2p, what, entry, value, error, text) -> None:
    rank, tag = (value, _TAG) if what == "rank" else (0, value)
    with pytest.raises(error, match=f"^{_WHERE[entry]}: " + text.format(what=what)):
        _ADDRESSED[entry][1](p2p, rank, tag)


def test_a_rank_outside_the_world_is_refused_by_reach_too(session) -> None:
    with pytest.raises(TypeError, match=r"^Session.reach: rank 1.0 is a float, not an integer"):
        session.reach(1.0)
    with pytest.raises(TypeError, match=r"^Session.reach: rank None is a NoneType"):
        session.reach(None)
    with pytest.raises(TypeError, match=r"^Session.reach: rank True is a bool"):
        session.reach(True)
    with pytest.raises(ValueError, match=r"^Session.reach: rank 1 is outside the world \(0..0\)"):
        session.reach(1)
    assert session.reach(_np("int64", 0)) == session.reach(0) == ["self"]


@_NEEDS_NUMPY
@pytest.mark.parametrize("entry", list(_ADDRESSED))
@pytest.mark.parametrize("kind", ["int64", "int8", "uint64", "intc"])
def test_numpy_integers_are_ranks_and_tags_at_every_entry_point(p2p, entry, kind) -> None:
    rank, tag = _np(kind, 0), _np(kind, _TAG)
    if entry not in ("send", "isend"):
        p2p.send(0, _TAG, b"numpy")
    result = _ADDRESSED[entry][1](p2p, rank, tag)
    # what each entry point hands back describes the message with plain ints
    if entry in ("probe", "iprobe"):
        assert result == Status(0, _TAG, 5)
        assert type(result.source) is int and type(result.tag) is int
    if entry in ("mprobe", "improbe"):
        assert result.status == Status(0, _TAG, 5)
        result.recv(bytearray(8))
    elif entry == "irecv":
        assert result.wait(timeout=10) == 5
    elif entry == "isend":
        result.wait(timeout=10)
    if entry in ("send", "isend"):
        assert p2p.recv(0, _TAG, bytearray(8), timeout=10) == 1
    elif entry in ("probe", "iprobe"):
        assert p2p.recv(0, _TAG, bytearray(8), timeout=10) == 5


# -- timeouts ---------------------------------------------------------------------

_BAD_TIMEOUTS = [
    (math.nan, ValueError, "timeout nan is not a finite number of seconds >= 0"),
    (-1, ValueError, "timeout -1 is not a finite number of seconds >= 0"),
    (-0.5, ValueError, "timeout -0.5 is not a finite number of seconds >= 0"),
    (math.inf, ValueError, "timeout inf is not a finite number of seconds >= 0"),
    (-math.inf, ValueError, "timeout -inf is not a finite number of seconds >= 0"),
    (10**400, ValueError, r"timeout 1000+ is not a finite number of seconds >= 0"),
    (True, TypeError, "timeout True is a bool, not a number of seconds"),
    ("1", TypeError, "timeout '1' is a str, not a number of seconds"),
    (b"1", TypeError, "timeout b'1' is a bytes, not a number of seconds"),
]
if numpy is not None:
    _BAD_TIMEOUTS.append(
        (numpy.float64("nan"), ValueError, "timeout .*nan.* is not a finite number")
    )


def _ready(p2p: Any) -> None:
    """A message for the receiving calls, so nothing would wait even without the check."""
    p2p.send(0, _TAG, b"ready")


def _drain(p2p: Any) -> None:
    assert p2p.recv(0, _TAG, bytearray(8), timeout=10) == 5


def _call_send(p2p: Any, timeout: Any) -> None:
    p2p.send(0, _TAG, b"x", timeout=timeout)
    assert p2p.recv(0, _TAG, bytearray(8), timeout=10) == 1


def _call_recv(p2p: Any, timeout: Any) -> None:
    _ready(p2p)
    try:
        p2p.recv(0, _TAG, bytearray(8), timeout=timeout)
    except BaseException:
        _drain(p2p)
        raise


def _call_probe(p2p: Any, timeout: Any) -> None:
    _ready(p2p)
    try:
        p2p.probe(0, _TAG, timeout=timeout)
    finally:
        _drain(p2p)


def _call_mprobe(p2p: Any, timeout: Any) -> None:
    _ready(p2p)
    try:
        message = p2p.mprobe(ANY_SOURCE, ANY_TAG, timeout=timeout)
    except BaseException:
        _drain(p2p)
        raise
    assert message.recv(bytearray(8)) == 5


def _finished_request(p2p: Any) -> Any:
    request = p2p.irecv(0, _TAG, bytearray(8))
    p2p.send(0, _TAG, b"ready")
    assert request.test()
    return request


def _call_wait(p2p: Any, timeout: Any) -> None:
    _finished_request(p2p).wait(timeout=timeout)


def _call_wait_any(p2p: Any, timeout: Any) -> None:
    wait_any([_finished_request(p2p)], timeout=timeout)


def _call_wait_all(p2p: Any, timeout: Any) -> None:
    wait_all([_finished_request(p2p)], timeout=timeout)


def _call_message_recv(p2p: Any, timeout: Any) -> None:
    _ready(p2p)
    message = p2p.improbe(0, _TAG)
    assert message is not None
    try:
        message.recv(bytearray(8), timeout=timeout)
    except BaseException:
        assert message.recv(bytearray(8)) == 5  # the refused call did not use the handle up
        raise


_TIMED: dict[str, tuple[str, Callable[[Any, Any], None]]] = {
    "send": ("p2p send", _call_send),
    "recv": ("p2p recv", _call_recv),
    "probe": ("p2p probe", _call_probe),
    "mprobe": ("p2p mprobe", _call_mprobe),
    "Request.wait": ("p2p wait", _call_wait),
    "wait_any": ("p2p wait_any", _call_wait_any),
    "wait_all": ("p2p wait_all", _call_wait_all),
    "Message.recv": ("p2p message recv", _call_message_recv),
}


@pytest.mark.parametrize(
    ("value", "error", "text"),
    [pytest.param(v, e, t, id=repr(v)[:20]) for v, e, t in _BAD_TIMEOUTS],
)
@pytest.mark.parametrize("entry", list(_TIMED))
def test_a_hostile_timeout_is_refused_naming_the_timeout(p2p, entry, value, error, text) -> None:
    where, call = _TIMED[entry]
    with pytest.raises(error, match=f"^{where}: {text}"):
        call(p2p, value)


@pytest.mark.parametrize("entry", list(_TIMED))
def test_good_timeouts_are_accepted_everywhere(p2p, entry) -> None:
    _, call = _TIMED[entry]
    for value in (0, 0.0, 5, 2.5, 1e9, _np("float32", 3), _np("int64", 3)):
        call(p2p, value)


def test_a_nan_timeout_is_refused_at_once_not_waited_on_forever(p2p) -> None:
    """Nothing will arrive: before, the wait's deadline never passed."""
    request = p2p.irecv(0, _TAG + 1, bytearray(8))
    outcome: list[BaseException] = []

    def wait() -> None:
        try:
            request.wait(timeout=math.nan)
        except BaseException as exc:
            outcome.append(exc)

    waiter = threading.Thread(target=wait, daemon=True)
    waiter.start()
    waiter.join(timeout=30)
    try:
        assert not waiter.is_alive(), "wait(timeout=nan) is still waiting"
        assert len(outcome) == 1 and isinstance(outcome[0], ValueError), outcome
    finally:
        assert request.cancel()
