"""A world's bound is checked where it is given: a clear error naming the world and the value."""

from __future__ import annotations

import socket

import pytest

import pmca


@pytest.mark.parametrize(
    ("timeout", "error", "text"),
    [
        (True, TypeError, "timeout True is a bool, not seconds"),
        ("5", TypeError, "timeout '5' is a str, not seconds"),
        (0, ValueError, "timeout 0 is not a finite number of seconds > 0"),
        (-1.5, ValueError, "timeout -1.5 is not a finite number of seconds > 0"),
        (float("nan"), ValueError, "timeout nan is not a finite number of seconds > 0"),
        (float("inf"), ValueError, "timeout inf is not a finite number of seconds > 0"),
        pytest.param(
            10**400, ValueError, "is not a finite number of seconds > 0", id="beyond-any-float"
        ),
    ],
)
def test_a_bad_world_timeout_is_refused_naming_it(timeout, error, text) -> None:
    left, right = socket.socketpair()
    with left, right:
        with pytest.raises(error) as made:
            pmca.world.PairWorld(left, 0, timeout=timeout)
        world = pmca.world.PairWorld(left, 0, timeout=2.5)
        assert world.timeout == 2.5
        with pytest.raises(error) as waited:
            world.barrier(timeout=timeout)
    assert str(made.value).startswith("pmca.world.PairWorld: timeout ")
    assert str(waited.value).startswith("PairWorld barrier: timeout ")
    assert text in str(made.value) and text in str(waited.value)
