"""Every public name has one public home, and its ``__module__`` says which.

Walks the ``__all__`` of every public package and module of pmca: each class
and function pmca defines must name a public module (no ``_private``
segment) that exports it under its own name, and pickle must find it there.
"""

from __future__ import annotations

import importlib
import inspect
import pickle
import pkgutil
import subprocess
import sys
import textwrap
from collections.abc import Iterator

import pytest

import pmca


def _public_modules() -> Iterator[str]:
    yield "pmca"
    for info in pkgutil.walk_packages(pmca.__path__, "pmca."):
        parts = info.name.split(".")
        if any(part.startswith("_") for part in parts) or parts[-1].startswith("libpmca"):
            continue  # private, or a native library next to the code that loads it
        yield info.name


def _exported() -> list[tuple[str, str, object]]:
    found = []
    for name in _public_modules():
        module = importlib.import_module(name)
        for attribute in getattr(module, "__all__", ()):
            obj = getattr(module, attribute)
            if (inspect.isclass(obj) or inspect.isfunction(obj)) and str(obj.__module__).startswith(
                "pmca"
            ):
                found.append((name, attribute, obj))
    return found


#: Names only: a component package unloaded by a dso-mode test before this one
#: runs is imported afresh, with new class objects, so each test looks its own up.
EXPORTED = [(where, attribute) for where, attribute, _ in _exported()]


def test_the_walk_finds_the_names_users_write() -> None:
    homes = {(obj.__module__, obj.__qualname__) for _, _, obj in _exported()}
    assert ("pmca.p2p", "TruncationError") in homes
    assert ("pmca.btl", "PeerFailed") in homes
    assert len(EXPORTED) > 150


@pytest.mark.parametrize(("where", "attribute"), EXPORTED, ids=[f"{m}.{a}" for m, a in EXPORTED])
def test_module_is_a_public_home_that_exports_it(where: str, attribute: str) -> None:
    obj = getattr(importlib.import_module(where), attribute)
    home = obj.__module__
    assert not any(part.startswith("_") for part in home.split(".")), (
        f"{where}.{attribute} says it lives in {home}"
    )
    module = importlib.import_module(home)
    assert attribute in getattr(module, "__all__", ()), f"{home}.__all__ lacks {attribute}"
    assert getattr(module, obj.__qualname__) is obj
    assert pickle.loads(pickle.dumps(obj)) is obj


def test_instances_pickle_and_attrs_reprs_keep_their_short_names() -> None:
    from pmca.btl import Flags, Limits

    limits = Limits(
        exclusivity=1,
        latency=2,
        bandwidth=3,
        eager_limit=4,
        rndv_eager_limit=5,
        max_send_size=6,
        flags=Flags.SEND,
    )
    assert repr(limits).startswith("Limits(exclusivity=1, ")
    assert repr(pickle.loads(pickle.dumps(limits))) == repr(limits)
    assert pickle.loads(pickle.dumps(Flags.SEND)) is Flags.SEND


def test_a_fresh_process_names_the_public_path_even_before_the_package_attribute() -> None:
    """Marked where defined: importing the private module first changes nothing."""
    code = textwrap.dedent(
        """
        import traceback
        from pmca.p2p._requests import TruncationError
        from pmca.btl._interface import PeerFailed
        from pmca.mca.params._errors import ParamValueError
        for error in (TruncationError("too long"), PeerFailed("rank 1 is gone", rank=1)):
            print(traceback.format_exception_only(type(error), error)[-1].strip())
        print(ParamValueError.__module__)
        """
    )
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=True
    )
    assert done.stdout.splitlines() == [
        "pmca.p2p.TruncationError: too long",
        "pmca.btl.PeerFailed: rank 1 is gone",
        "pmca.mca.params",
    ]
