"""Every registered parameter against hostile values: refused by name, never a raw error.

Each value is given to one parameter through ``Session(mca=...)`` and every
framework's components then register their parameters (the inventory
``pmca info`` takes): the path a session's init takes to read a value. A
value is either accepted or refused with a :class:`ParamValueError` (or, for
the parameter-file parameters, a :class:`ParamFileError`; for a selection
parameter, a :class:`SelectionError`) that names the parameter; anything
else (``OverflowError``, ``OSError``, ``ValueError``...) fails the test.
The matrix is fixed: the same cases run every time.
"""

from __future__ import annotations

import warnings

import pytest

import pmca
from pmca.mca import SelectionError
from pmca.mca.params import ParamFileError, ParamValueError
from pmca.runtime import RUNTIME, inventory

_LONG = "x" * 5000
#: Text values, as a file or the environment gives them.
HOSTILE_TEXT = [
    "-1",
    "0",
    "-0",
    "1",
    "2147483647",
    "2147483648",
    "4294967296",
    "4294967360",
    "9223372036854775807",
    "9223372036854775808",
    "18446744073709551616",
    "-9223372036854775809",
    "1e309",
    "-1e309",
    "inf",
    "-inf",
    "nan",
    "1.5",
    "0x",
    "1k",
    "16g",
    "\u0663",  # ARABIC-INDIC DIGIT THREE
    "\uff10",  # FULLWIDTH DIGIT ZERO
    "\u00b2",  # SUPERSCRIPT TWO
    "",
    " ",
    "\t\n",
    "\u2003",
    "a\x00b",
    "/tmp/\x00",
    _LONG,
    "/" + "y/" * 3000,
    "definitely-not-a-word",
    "true",
    "auto",
    "^",
    ",,,",
    "all",
]
#: Python values, as the API gives them.
HOSTILE_OBJECTS: list[object] = [
    -1,
    0,
    2**31,
    2**32,
    2**63,
    2**64,
    -(2**63) - 1,
    10**400,
    float("nan"),
    float("inf"),
    -float("inf"),
    True,
    b"bytes",
    ["a", "b"],
    3.5,
]
HOSTILE = HOSTILE_TEXT + HOSTILE_OBJECTS


def _registered() -> list[tuple[str, list[str] | None]]:
    """Every registered parameter, with the frameworks to take the inventory of.

    A core parameter (``mca_base_component_path``...) is read while every
    framework finds its components: ``None``, all of them.
    """
    with pmca.Session(frameworks=[]), inventory():
        frameworks = set(RUNTIME.catalog.frameworks)
        found = []
        for param in RUNTIME.params.params():
            framework = param.group.partition("_")[0]
            found.append((param.full_name, [framework] if framework in frameworks else None))
        return found


@pytest.fixture(scope="module")
def registered() -> list[tuple[str, list[str] | None]]:
    params = _registered()
    assert len(params) > 60, params  # every built-in framework and component
    return params


@pytest.mark.parametrize("value", HOSTILE, ids=lambda v: repr(v)[:24])
def test_every_parameter_refuses_a_hostile_value_by_name(pmca_env, registered, value) -> None:
    raw: list[str] = []
    for name, frameworks in registered:
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                with pmca.Session(mca={name: value}, frameworks=[]), inventory(frameworks):
                    pass
        except (ParamValueError, ParamFileError, SelectionError) as exc:
            if name not in str(exc):
                raw.append(f"{name}: {type(exc).__name__} does not name it: {exc}"[:300])
        except Exception as exc:
            raw.append(f"{name}: raw {type(exc).__name__}: {exc}"[:300])
    assert not raw, "\n".join(raw)
