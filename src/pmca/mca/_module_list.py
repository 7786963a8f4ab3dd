"""``OpenFramework.modules``: a method, still readable as the list it once was.

A framework's base reads its selected modules as ``self.framework.modules()``,
the same call as ``Session.framework(name).modules()``. It used to be a
list property (``self.framework.modules``); code that still reads it so keeps
working for now, with a :class:`DeprecationWarning` at each use as a list.
"""

from __future__ import annotations

import warnings
from collections.abc import Iterator
from typing import SupportsIndex, overload

_USE_THE_CALL = (
    "reading a framework's modules as a list attribute (framework.modules) is deprecated: "
    "call framework.modules(), as on Session.framework(name)"
)


def _deprecated() -> None:
    warnings.warn(_USE_THE_CALL, DeprecationWarning, stacklevel=3)


class ModuleList(list[object]):
    """The selected modules, best first; call it for a plain list (the supported use)."""

    def __call__(self) -> list[object]:
        return list(super().__iter__())

    def __iter__(self) -> Iterator[object]:
        _deprecated()
        return super().__iter__()

    def __len__(self) -> int:
        _deprecated()
        return super().__len__()

    @overload
    def __getitem__(self, index: SupportsIndex) -> object: ...

    @overload
    def __getitem__(self, index: slice) -> list[object]: ...

    def __getitem__(self, index: SupportsIndex | slice) -> object:
        _deprecated()
        return super().__getitem__(index)

    def __contains__(self, item: object) -> bool:
        _deprecated()
        return super().__contains__(item)
