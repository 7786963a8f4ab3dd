"""Finding references that outlived the component they point at.

Open MPI's #13021 crash came from a global (``opal_patcher``) that still
pointed into an unloaded component. pmca checks, every time a component is
unloaded, that no module-level global of pmca refers to it any more.
"""

from __future__ import annotations

import sys
from collections.abc import Iterable


def _refers_to(value: object, ids: set[int]) -> bool:
    if id(value) in ids or id(getattr(value, "__self__", None)) in ids:
        return True
    if isinstance(value, dict):
        return any(id(v) in ids or id(k) in ids for k, v in list(value.items()))
    if isinstance(value, (list, tuple, set, frozenset)):
        return any(id(v) in ids for v in list(value))
    return False


def find_stale_references(objects: Iterable[object], *, package: str = "pmca") -> list[str]:
    """Name every ``module.global`` of ``package`` that refers to ``objects``.

    Looks at module globals and one level into containers held by them, and
    at bound methods of the objects.
    """
    ids = {id(obj) for obj in objects}
    found: list[str] = []
    for module_name, module in list(sys.modules.items()):
        if module is None or not (module_name == package or module_name.startswith(package + ".")):
            continue
        if id(module) in ids:
            continue
        for attribute, value in list(vars(module).items()):
            # Dunders (__builtins__ above all) are the interpreter's, not pmca's state.
            if attribute.startswith("__"):
                continue
            if _refers_to(value, ids):
                found.append(f"{module_name}.{attribute}")
    return found
