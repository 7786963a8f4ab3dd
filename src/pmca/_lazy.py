"""Module attributes imported at first use (PEP 562), so ``import pmca`` stays cheap.

A component imports ``pmca`` for :class:`pmca.Component` and the markers; it
should not pay for the session runtime, the native hooks or the command line.
"""

from __future__ import annotations

import importlib
import sys

TYPE_CHECKING = False  # typing.TYPE_CHECKING, without importing typing for it
if TYPE_CHECKING:
    from collections.abc import Callable, Mapping


def lazy_attributes(
    package: str, targets: Mapping[str, str]
) -> tuple[Callable[[str], object], Callable[[], list[str]]]:
    """``__getattr__`` and ``__dir__`` for ``package``.

    ``targets`` maps an attribute to ``".module:attribute"`` (relative to
    ``package``) or to ``".module"`` for a submodule. The value is stored in
    the package once imported, so each attribute is looked up only once.
    """

    def __getattr__(name: str) -> object:
        target = targets.get(name)
        if target is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        module_name, _, attribute = target.partition(":")
        module = importlib.import_module(module_name, package)
        value = getattr(module, attribute) if attribute else module
        setattr(sys.modules[package], name, value)
        return value

    def __dir__() -> list[str]:
        return sorted({*vars(sys.modules[package]), *targets})

    return __getattr__, __dir__
