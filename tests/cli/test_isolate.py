"""``pmca info --isolate`` and ``pmca doctor --isolate`` survive a component that crashes at import.

Without it, a drop-in or entry-point component whose import kills the
interpreter takes ``pmca info`` down with it (exit by SIGSEGV) naming
nothing; isolated, each third-party component is imported in a child first
and the one that crashed is named, with its entry point and distribution.
"""

from __future__ import annotations

import signal
from collections.abc import Callable

import pytest

from pmca.testing._distributions import make_distribution

from .conftest import Result

_CRASHES = {
    "kill": "import os, signal\nos.kill(os.getpid(), signal.SIGSEGV)\n",
    "null-read": "import ctypes\nctypes.string_at(0)\n",
}


def _crashing_distribution(tmp_path, how: str):  # type: ignore[no-untyped-def]
    site = tmp_path / "site"
    make_distribution(
        site,
        "pmca-crashy-memory",
        entry_points={"pmca.memory": {"crashy": "crashy_memory:Crashy"}},
        modules={"crashy_memory": _CRASHES[how]},
    )
    return site


@pytest.mark.parametrize("how", sorted(_CRASHES))
def test_info_isolated_names_the_component_that_crashed(
    run_pmca: Callable[..., Result], tmp_path, how
) -> None:
    site = _crashing_distribution(tmp_path, how)
    crashed = run_pmca("info", "--parsable", path=(site,))
    assert crashed.code == -signal.SIGSEGV, crashed  # what isolation is for
    result = run_pmca("info", "--parsable", "--isolate", path=(site,))
    assert result.code == 0, result.out + result.err
    text = result.out + result.err
    assert "crashy" in text, text
    assert "importing it killed the process (SIGSEGV)" in text, text
    assert "distribution pmca-crashy-memory 0.1.0" in text, text
    assert "mca:memory:patcher" in result.out or "memory:patcher" in result.out, result.out


def test_doctor_isolated_names_the_component_that_crashed(
    run_pmca: Callable[..., Result], tmp_path
) -> None:
    site = _crashing_distribution(tmp_path, "kill")
    result = run_pmca("doctor", "--quick", "--isolate", "--json", path=(site,))
    assert result.code in (0, 1), result.out + result.err  # judged, not crashed
    assert "importing it killed the process (SIGSEGV)" in result.out, result.out
    assert "pmca-crashy-memory 0.1.0" in result.out, result.out
