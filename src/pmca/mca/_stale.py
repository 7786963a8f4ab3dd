"""Finding references that outlived the component they point at.

Open MPI's #13021 crash came from a global (``opal_patcher``) that still
pointed into an unloaded component. pmca checks, every time a component is
unloaded, that no module-level global of pmca, nor of any package that
provided a component (third-party plugins included), refers to it any more.

The check sees Python references only: a raw address kept as an integer
(what ``opal_patcher`` was in C) is invisible to it. That is what the
address quarantine of unloaded libraries is for (:mod:`pmca.mca._loader`).
"""

from __future__ import annotations

import builtins
import sys
from collections.abc import Iterable
from itertools import chain, compress
from types import MethodType, ModuleType


def package_of(obj: object) -> str | None:
    """The top-level package that defined ``obj`` (a module, or an instance's class)."""
    name = obj.__name__ if isinstance(obj, ModuleType) else type(obj).__module__
    top = str(name or "").partition(".")[0]
    return top or None


def _referent(value: object, ids: set[int]) -> int | None:
    """The id of the departed object ``value`` refers to, if any."""
    # Exact type checks: this runs over every global of every scanned module,
    # and isinstance()/getattr() on arbitrary objects is slow.
    if id(value) in ids:
        return id(value)
    kind = type(value)
    candidates: list[object]
    if kind is MethodType:
        candidates = [value.__self__]  # type: ignore[attr-defined]
    elif kind is dict:
        candidates = [item for pair in list(value.items()) for item in pair]  # type: ignore[attr-defined]
    elif kind in (list, tuple, set, frozenset):
        candidates = list(value)  # type: ignore[call-overload]
    else:
        return None
    return next((id(c) for c in candidates if id(c) in ids), None)


_BUILTINS = vars(builtins)
_LOOKED_INTO = frozenset({MethodType, dict, list, tuple, set, frozenset})


def _may_refer(namespaces: Iterable[dict[str, object]], ids: set[int]) -> bool:
    """Whether any value of ``namespaces`` might be reported by :func:`_referent`.

    Looks at everything :func:`_referent` looks at, and more (dunders too),
    with identity sets and C-level iteration rather than Python code per
    global: this runs over every scanned module at each finalize, first over
    all of them at once. The exact check then runs only where it says yes.
    """
    values = list(chain.from_iterable(map(dict.values, namespaces)))
    if not ids.isdisjoint(map(id, values)):
        return True
    for value in compress(values, map(_LOOKED_INTO.__contains__, map(type, values))):
        kind = type(value)
        if kind is MethodType:
            if id(value.__self__) in ids:  # type: ignore[attr-defined]
                return True
        elif kind is dict:
            if value is _BUILTINS:  # every module's __builtins__: the interpreter's
                continue
            keys, items = value.keys(), value.values()  # type: ignore[attr-defined]
            if not (ids.isdisjoint(map(id, keys)) and ids.isdisjoint(map(id, items))):
                return True
        elif not ids.isdisjoint(map(id, value)):  # type: ignore[call-overload]
            return True
    return False


def find_stale_references(
    objects: Iterable[object], *, packages: Iterable[str] = ("pmca",)
) -> list[tuple[str, int]]:
    """Every ``module.global`` of ``packages`` that refers to one of ``objects``.

    Looks at module globals, one level into containers held by them, and at
    bound methods. Returns ``(module.global, id of the object)`` pairs.
    """
    ids = {id(obj) for obj in objects}
    roots = set(packages)
    modules = [
        (name, module)
        for name, module in list(sys.modules.items())
        if module is not None and name.partition(".")[0] in roots and id(module) not in ids
    ]
    found: list[tuple[str, int]] = []
    # Almost always nothing refers to what closed: one pass over every module says so.
    if not _may_refer([vars(module) for _, module in modules], ids):
        return found
    for module_name, module in modules:
        if not _may_refer([vars(module)], ids):
            continue
        for attribute, value in list(vars(module).items()):
            # Dunders (__builtins__ above all) are the interpreter's, not the package's.
            if attribute.startswith("__"):
                continue
            referent = _referent(value, ids)
            if referent is not None:
                found.append((f"{module_name}.{attribute}", referent))
    return found
