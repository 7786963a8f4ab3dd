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

import sys
from collections.abc import Iterable
from types import MethodType, ModuleType

#: What :func:`find_stale_references` does with what it finds, per
#: ``mca_base_component_stale_check``.
STALE_CHECK_ACTIONS = ("error", "warn", "none")


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


def find_stale_references(
    objects: Iterable[object], *, packages: Iterable[str] = ("pmca",)
) -> list[tuple[str, int]]:
    """Every ``module.global`` of ``packages`` that refers to one of ``objects``.

    Looks at module globals, one level into containers held by them, and at
    bound methods. Returns ``(module.global, id of the object)`` pairs.
    """
    ids = {id(obj) for obj in objects}
    roots = set(packages)
    found: list[tuple[str, int]] = []
    for module_name, module in list(sys.modules.items()):
        if module is None or module_name.partition(".")[0] not in roots:
            continue
        if id(module) in ids:
            continue
        for attribute, value in list(vars(module).items()):
            # Dunders (__builtins__ above all) are the interpreter's, not the package's.
            if attribute.startswith("__"):
                continue
            referent = _referent(value, ids)
            if referent is not None:
                found.append((f"{module_name}.{attribute}", referent))
    return found
