"""Public names say where users find them: ``pmca.p2p.TruncationError``, not
``pmca.p2p._requests.TruncationError``.

pmca keeps its code in small private modules behind each public package's
``__all__``. A class or function defined in one is marked ``@public``: its
``__module__`` becomes the public package above the private module, so
tracebacks, ``repr`` of classes, documentation and pickles name the path
users import from (pickle finds the object again through that package).
"""

from __future__ import annotations

TYPE_CHECKING = False  # typing.TYPE_CHECKING, without importing typing for it
if TYPE_CHECKING:
    from typing import TypeVar

    _T = TypeVar("_T")


def public_home(module: str) -> str:
    """``module`` without its private tail: ``pmca.btl.base._modex`` -> ``pmca.btl.base``."""
    parts = module.split(".")
    for index, part in enumerate(parts):
        if part.startswith("_"):
            return ".".join(parts[:index])
    return module


def public(obj: _T) -> _T:
    """Give a class or function its public package as ``__module__``."""
    setattr(obj, "__module__", public_home(obj.__module__))  # noqa: B010 - any object
    return obj
